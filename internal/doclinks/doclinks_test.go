package doclinks

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAnchorsAsGitHubMakesThem(t *testing.T) {
	for heading, want := range map[string]string{
		"Honest weights at any budget":                                    "honest-weights-at-any-budget",
		"Migrating from contrib's `tail_sampling`":                        "migrating-from-contribs-tail_sampling",
		"10–11. End-to-end: the binary against the bare receive path":     "1011-end-to-end-the-binary-against-the-bare-receive-path",
		"The buffer outside the Go heap (`sampler.bufferMemory: mapped`)": "the-buffer-outside-the-go-heap-samplerbuffermemory-mapped",
		"OtelcolCostSampleNotRepresentative":                              "otelcolcostsamplenotrepresentative",
	} {
		assert.Equal(t, want, Anchor(heading), heading)
	}
}

// A broken file, a broken anchor, a link out of the repository and links
// in code are told apart.
func TestCheckFindsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "a.md"), []byte("# Title\n\n## Same\n\n## Same\n\n```\n## Not a heading\n[x](missing-in-code.md)\n```\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "README.md"), []byte(strings.Join([]string{
		"[ok](docs/a.md#title) [ok](docs/a.md#same-1) [ok](#readme) [web](https://example.com/x#y)",
		"[bad file](docs/b.md) [bad anchor](docs/a.md#not-a-heading) [outside](../shared/DESIGN.md)",
		"`[in code](nowhere.md)`",
		"# Readme",
	}, "\n")), 0o600))
	errs := Check(root, "README.md")
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	assert.ElementsMatch(t, []string{
		"README.md: docs/b.md: no such file",
		"README.md: docs/a.md#not-a-heading: no heading with that anchor in docs/a.md",
		"README.md: ../shared/DESIGN.md points outside the repository",
	}, msgs)
}

// committedMarkdown is the repository's root and its committed Markdown
// files.
func committedMarkdown(t *testing.T) (root string, files []string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	files = strings.Fields(string(out))
	require.NotEmpty(t, files)
	return root, files
}

// TestRepositoryDocsLinks checks every committed Markdown file.
func TestRepositoryDocsLinks(t *testing.T) {
	root, files := committedMarkdown(t)
	for _, f := range files {
		for _, e := range Check(root, f) {
			t.Error(e)
		}
	}
}

// TestFiguresAgreeWithBenchmarks: every figure a document quotes next to a
// link into docs/BENCHMARKS.md is in the section it links to.
func TestFiguresAgreeWithBenchmarks(t *testing.T) {
	root, files := committedMarkdown(t)
	quoted := 0
	for _, f := range files {
		if f == "docs/BENCHMARKS.md" || strings.HasPrefix(f, "docs/bench-results/") {
			continue
		}
		text, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		quoted += len(Figures(string(text)))
		for _, e := range CheckFigures(root, f) {
			t.Error(e)
		}
	}
	assert.Greater(t, quoted, 20, "the README's figures table quotes the reference")
}

// A figure edited in a quoting document no longer matches the reference.
func TestCheckFiguresCatchesAnEditedFigure(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "BENCHMARKS.md"), []byte("# B\n\n## 14. The gateway\n\n2.31× `load_balancing`, 1,041k spans/s, 0.85–1.06×\n\n## 15. Other\n\n3.03×\n"), 0o600))
	write := func(s string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, "README.md"), []byte(s), 0o600))
	}
	write("| [gateway](docs/BENCHMARKS.md#14-the-gateway) | 2.31×, 1041k spans/s, 0.85-1.06× |\n")
	assert.Empty(t, CheckFigures(root, "README.md"))
	write("| [gateway](docs/BENCHMARKS.md#14-the-gateway) | 2.6× |\n")
	assert.Len(t, CheckFigures(root, "README.md"), 1, "2.6× is not the reference's")
	write("| [gateway](docs/BENCHMARKS.md#14-the-gateway) | 3.03× |\n")
	assert.Len(t, CheckFigures(root, "README.md"), 1, "3.03× is in another section")
	write("The gateway is 2.6× faster, unlinked.\n")
	assert.Empty(t, CheckFigures(root, "README.md"), "only figures next to a link are checked")
}

// docs/BENCHMARKS.md is a reference: what stands now, each figure with its
// command; history goes to docs/bench-results/.
func TestBenchmarksIsAReference(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "BENCHMARKS.md"))
	require.NoError(t, err)
	assert.Less(t, strings.Count(string(text), "\n"), 300, "lines")
	secs := sections(string(text))
	for anchor, body := range secs {
		if anchor == "figures" || anchor == "what-is-not-met" || anchor == "behaviour-through-the-binary" || !strings.HasPrefix(strings.TrimSpace(body), "## ") {
			continue
		}
		assert.True(t, strings.Contains(body, "```") || strings.Contains(body, "go test") || strings.Contains(body, "loadramp"),
			"section %s names the command that measures it", anchor)
	}
}
