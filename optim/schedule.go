package optim

import "math"

// Schedule maps the global step (from 0), the steps per epoch and the total number of steps of the
// run to a factor of the optimizer's base learning rate. perEpoch and total are 0 while the length
// of an epoch is not known (the first epoch over a stream, see Data.Steps); the schedules here then
// keep the base rate.
type Schedule func(step, perEpoch, total int) float64

// Constant keeps the base learning rate.
func Constant() Schedule { return func(int, int, int) float64 { return 1 } }

// StepDecay multiplies the rate by gamma every `every` epochs (PyTorch's StepLR counted in
// epochs). every < 1 is treated as 1.
func StepDecay(every int, gamma float64) Schedule {
	every = max(every, 1)
	return func(step, perEpoch, _ int) float64 {
		if perEpoch == 0 {
			return 1
		}
		return math.Pow(gamma, float64(step/(perEpoch*every)))
	}
}

// Cosine warms the rate up linearly over the first warmupEpochs (a fraction is allowed) and then
// follows a half cosine from the base rate down to zero at the last step.
func Cosine(warmupEpochs float64) Schedule {
	return func(step, perEpoch, total int) float64 {
		warm := int(warmupEpochs * float64(perEpoch))
		if step < warm {
			return float64(step+1) / float64(warm)
		}
		span := total - warm
		if span <= 0 {
			return 1
		}
		return 0.5 * (1 + math.Cos(math.Pi*float64(step-warm)/float64(span)))
	}
}
