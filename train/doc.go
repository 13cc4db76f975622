// Package train trains image classifiers on a gpu.Device: a model is one module of package nn
// (Net makes one of yours a Model; NewModel builds package models' by name: Stoke's own "mlp",
// "cnn" and ResNets, the zoo's, and those you register with models.Register), the losses (softmax cross-entropy on class ids with label smoothing; on
// float targets soft-target cross-entropy, BCEWithLogits with pos_weight for multi-hot targets,
// MSE and smooth L1 for vectors: Config.Loss, picked from the data's targets by default), the
// optimizer of package optim (SGD, Adam, AdamW, RMSprop or your own optim.Optimizer) and its
// learning-rate schedule (Config.Schedule; and ReduceLROnPlateau's Plateau on the validation
// metric), a Trainer that runs epochs, evaluates and
// predicts (with fp16 loss scaling under reduced precision), finds a learning rate (FindLR, the
// range test), checkpoints to resume from, and
// FromLoader, which adapts a loaders.Loader.
//
// The loop around the step is PyTorch's and timm's: Config.Accumulate accumulates the gradients
// of several batches per optimizer step (one batch as large as them all, within float32 rounding,
// BatchNorm aside; under Collective reduced once per step, DDP's no_sync), ClipGradNorm clips their
// global norm (clip_grad_norm_, after the all-reduce), EMA keeps timm's ModelEmaV2 of the weights
// (EMAWarmup: ModelEmaV3's warm-up), evaluated beside the model, checkpointed and served by
// UseEMA; Plateau reduces the rate when the validation metric stalls, EarlyStop ends Fit normally
// after epochs without a better one (Result.StoppedEarly) and KeepBest writes the best epoch's
// checkpoint. Evaluations report top-1, top-5 and per-class accuracy (EvaluateClasses, every
// epoch's EpochResult) and the validation loss (the mean cross-entropy); the validation metric is
// the EMA's accuracy when there is an EMA that scores at least the model's (else the model's, and
// UseEMA then declines to serve the EMA), and
// under Collective it comes from the evaluation summed over the ranks, so that every rank decides alike.
//
// Weights go out as safetensors (Trainer.Export, torchvision's names for the resnets) and come
// back in (Trainer.LoadWeights, strict like PyTorch's load_state_dict unless weights.Options say
// otherwise), so a torchvision resnet18 or resnet50 runs here as it does in PyTorch. Fine-tuning
// starts from such a file (Config.Init: a head of another class count is replaced), freezes the
// backbone or a prefix of the layers (Config.FreezeBackbone, FreezeUpTo: no gradient, no
// optimizer state, BatchNorm on its running statistics) and slows the backbone's learning rate
// (Config.BackboneLRScale).
//
// Every kernel runs through the kernels op set of the device on the Trainer's compute stream
// (Trainer.Stream): give that stream to the loader, so that its host-to-device copies run on the
// loader's own copy stream, overlapped with compute, and are ordered before the kernels that read
// them. Batches arrive as uint8 pixels and int32 labels; the trainer normalizes them on its stream.
// A batch that MixUp or CutMix mixed (loaders.Config.Mix, Batch.Mix) trains against its soft
// targets, timm's (the smoothed one-hot targets of each sample and of its neighbour, blended).
//
// A run is deterministic: initial weights are a function of the seed, dropout masks of (seed,
// step), the kernels are bit-for-bit repeatable, and the loader's order is a function of its
// seed and the epoch. So the same seed gives the same final loss whatever the number of loader
// workers, and resuming from the checkpoint written after epoch k gives the same final weights as a
// run that was never interrupted.
//
// # Concurrency
//
// A Trainer is used by one goroutine. Fit calls Config.Progress on that goroutine. The trainer
// waits for its stream after every step (to read the loss) and at the end of every evaluation, so
// no work of a step is pending when Fit returns (unless ctx ended during a wait: see Cancellation).
//
// # Cancellation
//
// Every method that can wait for the device takes a context first (New, Fit, Evaluate,
// EvaluateClasses, Metrics, Predict, PredictBatch, Save, Load, Export, ExportONNX, LoadWeights,
// UseEMA; package predict's Open and Predict too), and each of its waits ends when ctx does: the call
// then returns an error wrapping ctx's (errors.Is(err, context.Canceled)). A ctx already done fails
// the call before it changes the trainer or writes a file. Work enqueued before ctx ended still
// runs on the stream, and the next call waits for it; Close, an io.Closer, waits for it without a
// deadline. A Fit cancelled inside a step leaves the trainer in that step: resume from the last
// checkpoint rather than saving it.
//
// # Ownership
//
// New binds the Model to the device: the model's parameters, gradients, activations and optimizer
// state are device buffers owned by the Trainer until Close frees them; a Model serves one Trainer.
// A Batch's buffers belong to its Data source; the trainer calls Batch.Release once its work
// reading them is enqueued.
package train
