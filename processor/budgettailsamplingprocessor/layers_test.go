package budgettailsamplingprocessor

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/otelcol-cost/otelcol-cost/"

// layers is docs/architecture.md's package diagram: what each of the
// sampler's packages may import of this module (tests aside). Imports run
// one way: nothing imports the processor package, and no part imports a
// part above it.
var layers = map[string][]string{
	"internal/traceinfo": {"/internal/otep235"},
	"internal/metadata":  {"/internal/instruments"},
	"internal/spanmem":   nil,
	"internal/names":     {"internal/traceinfo"},
	"internal/outliers":  nil,
	"internal/rules":     {"internal/traceinfo"},
	"internal/tracebuf":  {"internal/traceinfo", "internal/spanmem"},
	"internal/split":     {"internal/traceinfo", "internal/names", "internal/rules", "/internal/otlpwire", "/internal/otep235"},
	"internal/policy":    {"internal/traceinfo", "internal/rules", "/internal/pricing"},
	"internal/forward":   {"internal/spanmem", "/internal/otlpwire", "/internal/otep235", "/internal/spanwalk"},
	"internal/handoff":   {"internal/metadata", "internal/traceinfo", "/internal/ring"},
	"internal/relief":    {"internal/traceinfo"},
	"internal/recall":    nil,
	"internal/durable":   nil,
	"internal/rare":      nil,
	"internal/red":       {"internal/metadata"},
}

// importsOf lists what dir's non-test files import of this module, relative
// to the sampler ("internal/…") or to the module ("/internal/…").
func importsOf(t *testing.T, dir string) (imports []string, doc bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	self := module + "processor/budgettailsamplingprocessor"
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly|parser.ParseComments)
		require.NoError(t, err)
		doc = doc || file.Doc != nil && strings.HasPrefix(file.Doc.Text(), "Package "+file.Name.Name)
		for _, spec := range file.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			switch {
			case path == self:
				imports = append(imports, "processor")
			case strings.HasPrefix(path, self+"/"):
				imports = append(imports, strings.TrimPrefix(path, self+"/"))
			case strings.HasPrefix(path, module):
				imports = append(imports, "/"+strings.TrimPrefix(path, module))
			}
		}
	}
	slices.Sort(imports)
	return slices.Compact(imports), doc
}

// Every part of the sampler imports only the parts below it in the
// diagram, and says in its doc comment what it owns and must not know.
func TestPackagesImportOneWay(t *testing.T) {
	dirs, err := filepath.Glob("internal/*")
	require.NoError(t, err)
	var found []string
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		found = append(found, dir)
		allowed, ok := layers[dir]
		if !assert.True(t, ok, "%s is not in the diagram (layers, docs/architecture.md)", dir) {
			continue
		}
		imports, doc := importsOf(t, dir)
		for _, imp := range imports {
			assert.Contains(t, allowed, imp, "%s imports %s, which the diagram does not allow", dir, imp)
		}
		if dir != "internal/metadata" {
			assert.True(t, doc, "%s has no package doc comment", dir)
		}
	}
	assert.Len(t, found, len(layers), "every package of the diagram exists")
	// The shared wire codec knows nothing of the sampler.
	imports, doc := importsOf(t, "../../internal/otlpwire")
	assert.True(t, doc)
	for _, imp := range imports {
		assert.Equal(t, "/internal/otlpsize", imp, "internal/otlpwire imports only otlpsize")
	}
}

// The processor package is the glue: config, factory, metrics and the
// wiring of ConsumeTraces, Start and Shutdown.
func TestProcessorPackageIsGlue(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		lines += strings.Count(string(b), "\n")
	}
	t.Logf("%d non-test lines", lines)
	// 2,000 until the durable log (#50), whose glue walks the shards:
	// what it writes, marks and replays, and when segments go.
	assert.Less(t, lines, 2300, "the processor package keeps only the glue")
}
