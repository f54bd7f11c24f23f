//go:build unix

package spanmem // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"

import "syscall"

const canMap = true

func mapBlock(size int) ([]byte, error) {
	return syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
}

func unmapBlock(b []byte) { _ = syscall.Munmap(b) }
