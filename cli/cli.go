// Package cli is the stoke command line as a library: cmd/stoke is its Main, and a program of
// your own that imports it (and the packages that register your models) is a stoke that knows
// them, as caddy and hugo are built with plugins:
//
//	package main
//
//	import (
//		"github.com/stoke-ml/stoke/cli"
//		_ "example.com/mylayers" // models.Register in init
//	)
//
//	func main() { cli.Main() }
//
// The command line: train a classifier (on one process or data-parallel on
// several), benchmark or profile a data-loading pipeline, pack a dataset into shards, measure the
// collective, and list the devices.
//
//	stoke train   --data mnist --model mlp --epochs 3
//	stoke predict --checkpoint ck --data DIR --json
//	stoke predict --weights resnet18.safetensors --model resnet18 --size 224 --data DIR
//	stoke train   --data DIR --model resnet18 --init resnet18.safetensors --freeze
//	stoke export  --checkpoint ck --out model.safetensors
//	stoke bench   --data DIR --size 224 --batch 64 --workers 2
//	stoke profile --data DIR --batches 50 --trace trace.json --svg timeline.svg
//	stoke pack    --data DIR --out shards/ --format raw --compress zstd --max-side 256
//	stoke allreduce --min-bytes 4K --max-bytes 256M (one process per rank, under torchrun or with --rank/--world-size)
//	stoke devices
//
// Every subcommand that measures something takes --json: the last line of stdout is then one JSON
// object with its figures, or {"error": "...", "code": N} when it fails; -q leaves nothing else on
// stdout. A figure that is not finite (NaN, +Inf, -Inf) is written as null. Errors go to stderr as one line, and the exit status is 1 (2 for a usage error). The first
// SIGINT or SIGTERM stops the command cleanly; a second one ends the process at once (status 130).
// On Linux a worker started by torchrun gets SIGTERM when torchrun's agent dies.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/stoke-ml/stoke/internal/progress"
)

type command struct {
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

var commands = map[string]command{
	"train":     {"train an image classifier (mlp, cnn, resnets) end to end", runTrain},
	"bench":     {"measure the loader alone: read, decode, augment, collate, copy to the device", runBench},
	"profile":   {"find where a data-loading pipeline loses time", runProfile},
	"pack":      {"write a dataset as WebDataset tar shards (JPEG or raw+zstd)", runPack},
	"preview":   {"write a training batch, augmented as training sees it, as a PNG grid labelled by class", runPreview},
	"predict":   {"print a trained classifier's predictions (and accuracy) on a dataset", runPredict},
	"export":    {"write a model as safetensors weights (torchvision names for resnets) or as an ONNX graph", runExport},
	"devices":   {"list the backends built in and the devices found", runDevices},
	"summary":   {"print a model's layers, output shapes, parameters and mult-adds (torchinfo's summary)", runSummary},
	"allreduce": {"time the all-reduce of package collective across ranks (nccl-tests' all_reduce_perf)", runAllreduce},
}

// errUsage marks errors that are the caller's command line; they exit with status 2.
var errUsage = errors.New("usage")

// Main runs the command line of os.Args and exits with its status: the whole of cmd/stoke.
func Main() {
	if n := rankProcs(os.Getenv, runtime.GOMAXPROCS(0)); n > 0 {
		runtime.GOMAXPROCS(n) // one of several ranks on this host: its share of the cores
	}
	if err := endWithLauncher(); err != nil {
		fmt.Fprintf(os.Stderr, "stoke: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := interrupts(os.Stderr, os.Exit)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// interrupts returns a context that the first SIGINT or SIGTERM cancels; the second calls exit(130)
// at once, whatever the command is blocked in (a read from a device, a copy that does not end).
func interrupts(stderr io.Writer, exit func(int)) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "stoke: %v: stopping (interrupt again to quit at once)\n", s)
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "stoke: %v again: quitting now\n", s)
			exit(130)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

// Run executes one command line (args without the program's name: "train", "--data", ...),
// writing to stdout and stderr, and returns the exit status: 0, 1 for a failure, 2 for a usage
// error. ctx stops the command (Main cancels it on the first SIGINT or SIGTERM).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "stoke: unknown command %q (try stoke --help)\n", args[0])
		return 2
	}
	e := &env{name: args[0], summary: cmd.summary, stdout: stdout, stderr: stderr}
	err := cmd.run(ctx, e, args[1:])
	var code int
	var msg string
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		code, msg = 2, oneLine(err)
		msg = strings.Replace(msg, "usage: ", "", 1)
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		code, msg = 1, "interrupted: stopped before the end"
	default:
		code, msg = 1, oneLine(err)
	}
	fmt.Fprintf(stderr, "stoke %s: %s\n", args[0], msg)
	if e.json || wantsJSON(args[1:]) {
		// The contract of --json holds on failure too: stdout ends with one JSON object.
		b, _ := json.Marshal(struct {
			Error string `json:"error"`
			Code  int    `json:"code"`
		}{"stoke " + args[0] + ": " + msg, code})
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return code
}

// wantsJSON reports whether args ask for --json before the flags are parsed, so that a usage
// error in a later flag still ends stdout with the JSON error object.
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--json", "-json", "--json=true", "-json=true":
			return true
		case "--":
			return false
		}
	}
	return false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "stoke: a GPU-aware data loader and training pipeline\n\nusage: stoke <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nstoke <command> --help shows the command's flags.")
}

// maxErrorLine bounds the error line: its head and tail are kept (what failed, and the cause).
const maxErrorLine = 2000

// oneLine keeps an error on one line: the lines of joined errors are kept, separated by "; ",
// a panic's stack (from its "goroutine N [...]:" line on) stays out of the terminal, and a line
// over maxErrorLine bytes keeps its first 1,500 and last 400 bytes.
func oneLine(err error) string {
	return capLine(joinLines(err))
}

func capLine(s string) string {
	if len(s) <= maxErrorLine {
		return s
	}
	head, tail := 1500, len(s)-400
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return fmt.Sprintf("%s ... [%d bytes left out] ... %s", s[:head], tail-head, s[tail:])
}

func joinLines(err error) string {
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(l, "goroutine ") {
			parts = append(parts, "[stack omitted]")
			break
		}
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// env is what a command writes to, and the output flags every measuring command shares.
type env struct {
	name, summary  string
	stdout, stderr io.Writer
	json, quiet    bool
}

// flags returns a flag set for the command with --json and -q when measures is true.
func (e *env) flags(synopsis string, measures bool) *flag.FlagSet {
	fs := flag.NewFlagSet("stoke "+e.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: stoke %s %s\n\n%s\n\nflags:\n", e.name, synopsis, e.summary)
		fs.PrintDefaults()
	}
	if measures {
		fs.BoolVar(&e.json, "json", false, "make the last line of stdout one JSON object with the figures")
		fs.BoolVar(&e.quiet, "q", false, "quiet: no progress and no human-readable report (with --json: only the JSON)")
	}
	return fs
}

// parse parses args, turning flag errors into usage errors; stray arguments are refused.
func (e *env) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

// parseWithArgs is parse for a command that also takes arguments (stoke predict's images), which
// may come before, between or after the flags; it returns them in order. After "--" everything
// is an argument (a file named "-x.png").
func (e *env) parseWithArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		if consumed := len(args) - fs.NArg(); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, fs.Args()...), nil
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}

// printf writes the human-readable report (not with -q).
func (e *env) printf(format string, a ...any) {
	if !e.quiet {
		fmt.Fprintf(e.stdout, format, a...)
	}
}

// progressMode is how long work is shown: on stderr, so stdout keeps the report and the JSON.
func (e *env) progressMode() progress.Mode {
	if e.quiet {
		return progress.Quiet
	}
	return progress.Auto
}

// emit writes v as the final JSON line when --json is set (marshalJSON: a figure that is not
// finite is null).
func (e *env) emit(v any) error {
	if !e.json {
		return nil
	}
	b, err := marshalJSON(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}
