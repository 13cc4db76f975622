package tensorboard_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stoke-ml/stoke/tensorboard"
)

// Scalars go to an event file that TensorBoard reads, and the same rows to a CSV.
func Example() {
	dir, err := os.MkdirTemp("", "runs")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	now := time.Unix(1700000000, 0)

	tb, err := tensorboard.Create(filepath.Join(dir, "exp1"), now)
	if err != nil {
		log.Fatal(err)
	}
	csv, err := tensorboard.CreateCSV(filepath.Join(dir, "exp1"), "scalars.csv")
	if err != nil {
		log.Fatal(err)
	}
	for step, loss := range []float64{2.3, 1.1, 0.6} {
		tb.Scalar("train/loss", int64(step+1), loss, now)
		csv.Scalar("train/loss", int64(step+1), loss, now)
	}
	if err := tb.Close(); err != nil { // the first error of any write, if one failed
		log.Fatal(err)
	}
	if err := csv.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.HasPrefix(filepath.Base(tb.Path()), "events.out.tfevents.1700000000."))
	b, err := os.ReadFile(csv.Path())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(b))
	// Output:
	// true
	// step,tag,value,wall_time
	// 1,train/loss,2.3,1700000000.000000
	// 2,train/loss,1.1,1700000000.000000
	// 3,train/loss,0.6,1700000000.000000
}
