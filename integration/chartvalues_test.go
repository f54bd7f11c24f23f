package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sigsyaml "sigs.k8s.io/yaml"
)

// valuePaths lists values.yaml's keys to document: top-level scalars and
// lists, and the keys one level into each top-level map ("gateway.replicas",
// "gateway.autoscaling").
func valuePaths(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, sigsyaml.Unmarshal(raw, &values))
	var paths []string
	for top, v := range values {
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 {
			paths = append(paths, top)
			continue
		}
		for key := range m {
			paths = append(paths, top+"."+key)
		}
	}
	sort.Strings(paths)
	return paths
}

// documentedValues reads the first column of docs/deploy.md's values
// table: each backticked path, `*.x` standing for gateway.x and sampler.x,
// a trailing `.*` for everything under it.
func documentedValues(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "deploy.md"))
	require.NoError(t, err)
	text := string(doc)
	start := strings.Index(text, "| Value | Default | Meaning |")
	require.GreaterOrEqual(t, start, 0, "docs/deploy.md has the values table")
	tick := regexp.MustCompile("`([^`]+)`")
	var out []string
	for _, line := range strings.Split(text[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		first := strings.Split(line, "|")[1]
		for _, m := range tick.FindAllStringSubmatch(first, -1) {
			p := strings.TrimSuffix(m[1], ".*")
			if rest, ok := strings.CutPrefix(p, "*."); ok {
				out = append(out, "gateway."+rest, "sampler."+rest)
				continue
			}
			out = append(out, p)
		}
	}
	return out
}

// Every value of the chart is in docs/deploy.md's values table (the table
// once left out a dozen), and the table names no value the chart lacks.
func TestChartValuesAreAllDocumented(t *testing.T) {
	paths := valuePaths(t)
	documented := documentedValues(t)
	covers := func(doc, path string) bool {
		return doc == path || strings.HasPrefix(path, doc+".") || strings.HasPrefix(doc, path+".")
	}
	for _, path := range paths {
		found := false
		for _, d := range documented {
			found = found || covers(d, path)
		}
		assert.True(t, found, "values.yaml's %s is not in docs/deploy.md's values table", path)
	}
	for _, d := range documented {
		found := false
		for _, path := range paths {
			found = found || covers(d, path)
		}
		assert.True(t, found, "docs/deploy.md's values table names %s, which values.yaml does not have", d)
	}
}
