package doclinks // import "github.com/otelcol-cost/otelcol-cost/internal/doclinks"

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// figureRE is a measured figure as the docs write them: a number or a
// range of two, with its unit (×, %, k spans/s, µs, ns). Sizes in bytes are
// left out: next to a link they are as often settings (a 2 GiB limit) as
// measurements.
var figureRE = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?(?:[–-]\d[\d,]*(?:\.\d+)?)?\s?(?:×|%|k\b|µs|ns\b)`)

// linkTextRE is a whole inline link.
var linkTextRE = regexp.MustCompile(`!?\[[^\]]*\]\([^)]*\)`)

// benchLinkRE is a link into the benchmarks reference, with its anchor.
var benchLinkRE = regexp.MustCompile(`\]\(([^)#\s]*BENCHMARKS\.md)(?:#([^)\s]+))?\)`)

// Figures lists the figures a Markdown text quotes from the benchmarks
// reference: in every paragraph or table row that links to BENCHMARKS.md,
// each figure, with the anchor it links to ("" for the whole file).
func Figures(text string) (out []Quote) {
	for _, block := range blocks(text) {
		links := benchLinkRE.FindAllStringSubmatch(block, -1)
		if links == nil {
			continue
		}
		// A link's text is a label ("at 10k"), not a figure.
		plain := linkTextRE.ReplaceAllString(block, "")
		for _, f := range figureRE.FindAllString(plain, -1) {
			anchors := make([]string, 0, len(links))
			for _, l := range links {
				anchors = append(anchors, l[2])
			}
			out = append(out, Quote{Figure: f, Anchors: anchors, Context: strings.TrimSpace(firstLine(block))})
		}
	}
	return out
}

// Quote is one figure quoted outside the reference.
type Quote struct {
	Figure  string
	Anchors []string // the sections it may come from ("": anywhere)
	Context string
}

// blocks splits Markdown into paragraphs, each table row on its own.
func blocks(text string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case strings.HasPrefix(strings.TrimSpace(line), "|"):
			flush()
			out = append(out, line)
		default:
			cur = append(cur, line)
		}
	}
	flush()
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 100 {
		line = line[:100] + "…"
	}
	return line
}

// sections maps each heading's anchor of a Markdown text to the text under
// it, down to the next heading of the same or a higher level.
func sections(text string) map[string]string {
	lines := strings.Split(text, "\n")
	out := map[string]string{}
	type open struct {
		anchor string
		level  int
		from   int
	}
	var stack []open
	closeTo := func(level, at int) {
		for len(stack) > 0 && stack[len(stack)-1].level >= level {
			o := stack[len(stack)-1]
			out[o.anchor] = strings.Join(lines[o.from:at], "\n")
			stack = stack[:len(stack)-1]
		}
	}
	for i, line := range lines {
		if m := headingRE.FindStringSubmatch(line); m != nil {
			level := len(line) - len(strings.TrimLeft(line, "#"))
			closeTo(level, i)
			stack = append(stack, open{Anchor(m[1]), level, i})
		}
	}
	closeTo(0, len(lines))
	return out
}

// normalize makes "1,041k" and "1041k", "a – b" and "a–b" compare equal.
func normalize(s string) string {
	return strings.NewReplacer(",", "", " ", "", "-", "–").Replace(s)
}

// CheckFigures reports each figure the Markdown file at path (relative to
// root) quotes from docs/BENCHMARKS.md that the section it links to does
// not contain (the whole reference when the link has no anchor).
func CheckFigures(root, path string) []error {
	ref, err := os.ReadFile(filepath.Join(root, "docs", "BENCHMARKS.md"))
	if err != nil {
		return []error{err}
	}
	secs := sections(string(ref))
	whole := normalize(string(ref))
	text, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return []error{err}
	}
	var errs []error
	// The reference's figures table is the summary every section's
	// figures are quoted from too.
	table := normalize(secs["figures"])
	for _, q := range Figures(string(text)) {
		found := strings.Contains(table, normalize(q.Figure))
		for _, a := range q.Anchors {
			in := whole
			if a != "" {
				in = normalize(secs[a])
			}
			found = found || strings.Contains(in, normalize(q.Figure))
		}
		if !found {
			errs = append(errs, fmt.Errorf("%s: %q is not in the section of docs/BENCHMARKS.md it links to (%v) — in: %s", path, q.Figure, q.Anchors, q.Context))
		}
	}
	return errs
}
