package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
)

type summaryLayerJSON struct {
	Name   string `json:"name"`
	Op     string `json:"op"`
	Output []int  `json:"output"`
	Params int64  `json:"params"`
	MACs   int64  `json:"macs"`
}

type summaryJSON struct {
	Model            string             `json:"model"`
	Input            []int              `json:"input"`
	Classes          int                `json:"classes"`
	Layers           []summaryLayerJSON `json:"layers"`
	Params           int64              `json:"params"`
	Trainable        int64              `json:"trainable_params"`
	Buffers          int64              `json:"buffer_values"`
	MACs             int64              `json:"macs"`
	ParamBytes       int64              `json:"param_bytes"`
	ActivationBytes  int64              `json:"activation_bytes"`
	TrainMemoryBytes int64              `json:"train_memory_bytes"`
}

// runSummary prints a model's layers, parameters and multiply-adds, as torchinfo's summary():
// a model by name at an input size, or a checkpoint's.
func runSummary(_ context.Context, e *env, args []string) error {
	fs := e.flags("(--model M [--size N] [--channels C] [--classes K] | --checkpoint PATH) [--batch B] [--optimizer O [--amsgrad]] [--grad-checkpointing] [--json]", true)
	model := fs.String("model", "", "the model ("+strings.Join(models.Names(), ", ")+")")
	size := fs.Int("size", 224, "with --model: the images' side")
	channels := fs.Int("channels", 3, "with --model: the images' channels")
	classes := fs.Int("classes", 1000, "with --model: the number of classes")
	ck := fs.String("checkpoint", "", "a checkpoint: its model, input and classes")
	batch := fs.Int("batch", 1, "the batch the mult-adds and the activations are counted for")
	gradCheckpointing := fs.Bool("grad-checkpointing", false, "count the activations a training pass keeps with gradient checkpointing (train --grad-checkpointing)")
	amsgrad := fs.Bool("amsgrad", false, "with --optimizer adam or adamw: count AMSGrad's third slot (train --amsgrad)")
	optimizer := fs.String("optimizer", "sgd", "the optimizer whose state the training memory counts: "+strings.Join(optim.Names, ", "))
	if err := e.parse(fs, args); err != nil {
		return err
	}
	var m *train.Model
	var err error
	switch {
	case (*model == "") == (*ck == ""):
		return fmt.Errorf("%w: give --model or --checkpoint", errUsage)
	case *batch < 1 || *batch > 1<<16:
		return fmt.Errorf("%w: --batch %d: want 1 to 65536", errUsage, *batch)
	case *ck != "":
		m, err = train.CheckpointModel(*ck)
	default:
		if *size < 1 || *size > 1<<14 || *channels < 1 || *channels > 64 || *classes < 1 || *classes > maxDeclaredClasses {
			return fmt.Errorf("%w: --size %d, --channels %d, --classes %d: want a side of 1 to 16384, 1 to 64 channels, 1 to %d classes",
				errUsage, *size, *channels, *classes, maxDeclaredClasses)
		}
		m, err = train.NewModel(*model, train.Shape{C: *channels, H: *size, W: *size}, *classes)
	}
	if err != nil {
		return err
	}
	if *gradCheckpointing {
		if _, err := models.SetGradCheckpointing(m.Module(), true); err != nil {
			return fmt.Errorf("%s: %w", m.Name(), err)
		}
	}
	slots, err := optimizerSlots(*optimizer, *amsgrad)
	if err != nil {
		return err
	}
	in := m.Input()
	s, err := nn.Summarize(m.Module(), *batch, in.C, in.H, in.W)
	if err != nil {
		return err
	}
	// Training keeps the weights, their gradients, the optimizer's slots and the activations.
	trainBytes := 4 * ((2+int64(slots))*s.Trainable + s.Buffers + s.Activations)
	out := summaryJSON{Model: m.Name(), Input: s.Input, Classes: m.Classes(), Params: s.Params, Trainable: s.Trainable,
		Buffers: s.Buffers, MACs: s.MACs, ParamBytes: 4 * s.Params, ActivationBytes: 4 * s.Activations, TrainMemoryBytes: trainBytes}
	for _, l := range s.Layers {
		out.Layers = append(out.Layers, summaryLayerJSON{l.Name, l.Op, l.Output, l.Params, l.MACs})
	}
	e.printf("%s\n%s", m, s)
	e.printf("Training memory with %s, at most: %.2f MB (weights, gradients, %d optimizer slot(s) per weight, activations)\n",
		*optimizer, float64(trainBytes)/1e6, slots)
	return e.emit(out)
}

// optimizerSlots is the number of values the optimizer keeps per trained value, with AMSGrad's
// (--amsgrad) for adam and adamw.
func optimizerSlots(name string, amsgrad bool) (int, error) {
	f := trainFlags{optimizer: name, epochs: 1, lr: 0.1, momentum: 0.9, amsgrad: amsgrad} // what train checks of them
	if err := f.check(); err != nil {
		return 0, err
	}
	opt, err := f.newOptimizer()
	if err != nil {
		return 0, err
	}
	return opt.Slots(), nil
}
