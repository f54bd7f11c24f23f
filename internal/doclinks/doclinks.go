// Package doclinks checks the relative links of Markdown files: each must
// name a file of the repository and, with a #fragment, a heading of that
// file (GitHub's anchors). `make lint` runs its test over every committed
// Markdown file.
//
// It owns the anchor rules and the link syntax it reads (inline links,
// not reference-style ones). It must not know which documents exist: the
// caller lists them.
package doclinks // import "github.com/otelcol-cost/otelcol-cost/internal/doclinks"

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

var (
	// linkRE is an inline link's target: [text](target) or ![alt](target),
	// an optional title after a space.
	linkRE    = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	fenceRE   = regexp.MustCompile("^\\s*(```|~~~)")
	codeRE    = regexp.MustCompile("`[^`]*`")
)

// Anchor is GitHub's anchor for a heading's text: lower case, spaces to
// hyphens, punctuation other than hyphens and underscores dropped.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the anchors of a Markdown text's headings (a repeated
// heading's get -1, -2, …), outside fenced code.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			fenced = !fenced
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		a := Anchor(m[1])
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// links lists a Markdown text's inline link targets outside code.
func links(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(line, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// Check reports every broken relative link of the Markdown file at path
// (relative to root): a target that is not a file or directory of the
// repository, one outside it, or a #fragment that is not a heading of the
// Markdown file it names. Absolute URLs are not checked.
func Check(root, path string) []error {
	text, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, target := range links(string(text)) {
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, frag, _ := strings.Cut(target, "#")
		dest := path
		if file != "" {
			dest = filepath.Join(filepath.Dir(path), file)
			if strings.HasPrefix(dest, "..") {
				errs = append(errs, fmt.Errorf("%s: %s points outside the repository", path, target))
				continue
			}
			if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: no such file", path, target))
				continue
			}
		}
		if frag == "" || !strings.HasSuffix(dest, ".md") {
			continue
		}
		destText, err := os.ReadFile(filepath.Join(root, dest))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", path, target, err))
			continue
		}
		if !anchors(string(destText))[frag] {
			errs = append(errs, fmt.Errorf("%s: %s: no heading with that anchor in %s", path, target, dest))
		}
	}
	return errs
}
