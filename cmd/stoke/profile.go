package main

import "context"

func runProfile(_ context.Context, e *env, args []string) error {
	fs := e.flags("--data SPEC [flags]", true)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	return notBuilt("profiling")
}
