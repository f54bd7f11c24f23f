// Package cmdline tells what the collector process was started to do.
// `otelcol-cost validate` builds every pipeline, running each component's
// constructor, and starts nothing; the collector tells components nothing
// of it. A component that must fail validate on what it may not stop a
// start for (a policy file it cannot apply), or that must not take what a
// running collector holds (its log's lock), asks Validating.
//
// It owns reading the command line; it must not know what the caller does
// with the answer.
package cmdline // import "github.com/otelcol-cost/otelcol-cost/internal/cmdline"

import (
	"os"
	"slices"
)

// Validating reports whether the process is `otelcol-cost validate`.
func Validating() bool { return validating(os.Args) }

func validating(args []string) bool {
	return len(args) > 1 && slices.Contains(args[1:], "validate")
}
