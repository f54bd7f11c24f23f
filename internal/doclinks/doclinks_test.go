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

// TestRepositoryDocsLinks checks every committed Markdown file.
func TestRepositoryDocsLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	files := strings.Fields(string(out))
	require.NotEmpty(t, files)
	for _, f := range files {
		for _, e := range Check(root, f) {
			t.Error(e)
		}
	}
}
