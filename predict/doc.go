// Package predict classifies images with a trained model, as timm's and torchvision's
// inference scripts do: the model's own evaluation transform (the checkpoint's Preprocess, or
// its weights'), then the forward pass in evaluation mode, then logits, probabilities and the
// top classes by name.
//
//	p, err := predict.Open(ctx, "runs/mnist-mlp.ckpt", dev, true, predict.Config{})
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//	preds, err := p.Predict(ctx, []transforms.Input{{Encoded: jpegBytes}})
//
// New runs the model of a train.Trainer one already holds (weights loaded with LoadWeights, a
// checkpoint resumed); Open opens a checkpoint and owns its trainer. stoke predict is this
// package over files, folders and globs.
package predict
