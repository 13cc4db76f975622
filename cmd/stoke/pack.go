package main

import "context"

func runPack(_ context.Context, e *env, args []string) error {
	fs := e.flags("--data SPEC --out DIR [flags]", true)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	return notBuilt("packing")
}
