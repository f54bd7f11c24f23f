// Package integration runs the built otelcol-cost binary against real OTLP
// peers on loopback.
package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the otelcol-cost under test: $OTELCOL_COST_BIN (what `make test`
// builds), else built once for this run from dist/.
var binary string

func TestMain(m *testing.M) {
	binary = os.Getenv("OTELCOL_COST_BIN")
	cleanup := func() {}
	if binary == "" {
		dir, err := os.MkdirTemp("", "otelcol-cost-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cleanup = func() { os.RemoveAll(dir) }
		binary = filepath.Join(dir, "otelcol-cost")
		cmd := exec.Command("go", "build", "-o", binary, ".")
		cmd.Dir = filepath.Join(repoRoot(), "dist")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building otelcol-cost:", err)
			cleanup()
			os.Exit(1)
		}
	}
	code := m.Run()
	printE2ETable()
	cleanup()
	os.Exit(code)
}

func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}
