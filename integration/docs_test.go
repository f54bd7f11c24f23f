package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	// markdownLink is a link's target in Markdown: [text](target).
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// urlScheme starts an address that is not a path: https:, mailto:.
	urlScheme = regexp.MustCompile(`^[a-z]+:`)
)

// TestDocLinksStayInTheRepository checks every relative link in the
// repository's Markdown: it must name a file or folder that exists, inside
// the repository, so that a clone reads whole (the docs once pointed at
// design notes kept beside the repository).
func TestDocLinksStayInTheRepository(t *testing.T) {
	root := repoRoot()
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md").Output()
	require.NoError(t, err, "listing the repository's Markdown")
	files := strings.Fields(string(out))
	require.NotEmpty(t, files)
	for _, file := range files {
		text, err := os.ReadFile(filepath.Join(root, file))
		require.NoError(t, err)
		for _, m := range markdownLink.FindAllSubmatch(text, -1) {
			if problem := linkProblem(root, file, string(m[1])); problem != "" {
				t.Errorf("%s links %q: %s", file, m[1], problem)
			}
		}
	}
}

// linkProblem says what is wrong with a link in file (relative to root),
// or "" when it is an external address, an anchor, or an existing path in
// the repository.
func linkProblem(root, file, target string) string {
	if strings.HasPrefix(target, "#") || urlScheme.MatchString(target) {
		return ""
	}
	target, _, _ = strings.Cut(target, "#")
	path := filepath.Clean(filepath.Join(filepath.Dir(file), target))
	if filepath.IsAbs(target) || path == ".." || strings.HasPrefix(path, "../") {
		return "outside the repository"
	}
	if _, err := os.Stat(filepath.Join(root, path)); err != nil {
		return "no such file in the repository"
	}
	return ""
}
