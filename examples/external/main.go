// Command external uses Stoke from a separate module, as a user's program does: everything it calls
// is exported API (nothing from internal/), and CI builds and runs it.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := exerciseData(); err != nil {
		fmt.Fprintln(os.Stderr, "external:", err)
		os.Exit(1)
	}
}
