//go:build !unix

package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import "errors"

const canMap = false

func mapBlock(int) ([]byte, error) { return nil, errors.New("no anonymous mappings on this platform") }

func unmapBlock([]byte) {}
