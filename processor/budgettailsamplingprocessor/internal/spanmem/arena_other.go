//go:build !unix

package spanmem // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"

import "errors"

const canMap = false

func mapBlock(int) ([]byte, error) { return nil, errors.New("no anonymous mappings on this platform") }

func unmapBlock([]byte) {}
