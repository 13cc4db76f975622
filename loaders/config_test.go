package loaders

import (
	"errors"
	"reflect"
	"runtime"
	"testing"
)

// TestConfigValidatePure: Validate checks and changes nothing; WithDefaults returns the filled
// copy and leaves what was set, AutoWorkers included.
func TestConfigValidatePure(t *testing.T) {
	var c Config
	if err := c.Validate(); err != nil || !reflect.DeepEqual(c, Config{}) {
		t.Fatalf("zero Config: Validate() = %v and changed it to %+v; want nil, unchanged", err, c)
	}
	d := c.WithDefaults()
	if !reflect.DeepEqual(c, Config{}) {
		t.Errorf("WithDefaults changed its receiver to %+v", c)
	}
	if d.Batch != DefaultBatch || d.Workers != runtime.GOMAXPROCS(0) || d.Prefetch != DefaultPrefetch || d.MemoryBudget != DefaultMemoryBudget() {
		t.Errorf("WithDefaults() = %+v; want batch %d, %d workers, prefetch %d, the default budget", d, DefaultBatch, runtime.GOMAXPROCS(0), DefaultPrefetch)
	}
	set := Config{Batch: 3, Workers: AutoWorkers, Prefetch: 1, MemoryBudget: -1}
	if got := set.WithDefaults(); !reflect.DeepEqual(got, set) {
		t.Errorf("WithDefaults of a set Config = %+v; want %+v", got, set)
	}
	if err := (Config{Batch: -1}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("Validate(batch -1) = %v; want ErrConfig", err)
	}
}
