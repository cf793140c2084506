// Command doclinks checks the links of README.md and docs/**/*.md: every relative link must name a file or
// directory of the repository, and every #anchor a heading of the page it points into, so that moving or
// renaming a page or a section cannot leave a reader at a dead end; and the index, docs/README.md, must link
// every page under docs/, so that a new page cannot be left where no reader finds it. External links are not fetched: the check
// is pure and runs in `make verify`.
package main

import (
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	fsys := os.DirFS(root)
	files, err := markdownFiles(fsys)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclinks:", err)
		os.Exit(2)
	}
	problems := append(check(fsys, files), unindexed(fsys, files)...)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "doclinks: %d broken links in %d pages\n", len(problems), len(files))
		os.Exit(1)
	}
	fmt.Printf("doclinks: %d pages, every relative link and anchor resolves\n", len(files))
}

// markdownFiles lists README.md and every .md file under docs/.
func markdownFiles(fsys fs.FS) ([]string, error) {
	files := []string{"README.md"}
	err := fs.WalkDir(fsys, "docs", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list docs: %w", err)
	}
	sort.Strings(files[1:])
	return files, nil
}

var (
	inlineLink = regexp.MustCompile(`\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?([^\s>]+)>?`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	mdLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// check returns one line per broken link of the given pages: file:line: target: why.
func check(fsys fs.FS, files []string) []string {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(p string) (map[string]bool, error) {
		if a, ok := anchors[p]; ok {
			return a, nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		a := pageAnchors(string(b))
		anchors[p] = a
		return a, nil
	}
	var problems []string
	for _, file := range files {
		b, err := fs.ReadFile(fsys, file)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", file, err))
			continue
		}
		for _, l := range pageLinks(string(b)) {
			if why := resolve(fsys, file, l.target, anchorsOf); why != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", file, l.line, l.target, why))
			}
		}
	}
	return problems
}

// proseLines yields a page's lines outside fenced code blocks, with their 0-based line numbers.
func proseLines(text string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		fence := ""
		for i, line := range strings.Split(text, "\n") {
			trimmed := strings.TrimSpace(line)
			if f := fenceOf(trimmed); f != "" {
				switch {
				case fence == "":
					fence = f
				case strings.HasPrefix(trimmed, fence):
					fence = ""
				}
				continue
			}
			if fence == "" && !yield(i, line) {
				return
			}
		}
	}
}

type link struct {
	line   int
	target string
}

// pageLinks returns the link targets of a page outside code blocks and code spans.
func pageLinks(text string) []link {
	var links []link
	for i, line := range proseLines(text) {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			links = append(links, link{line: i + 1, target: m[1]})
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			links = append(links, link{line: i + 1, target: m[1]})
		}
	}
	return links
}

func fenceOf(trimmed string) string {
	for _, f := range []string{"```", "~~~"} {
		if strings.HasPrefix(trimmed, f) {
			return f
		}
	}
	return ""
}

// resolve says why a link of file does not resolve, or "" when it does.
func resolve(fsys fs.FS, file, target string, anchorsOf func(string) (map[string]bool, error)) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	p, anchor, _ := strings.Cut(target, "#")
	if p == "" {
		p = file
	} else {
		if strings.HasPrefix(p, "/") {
			return "absolute path: link relative to the page"
		}
		p = path.Join(path.Dir(file), p)
		if p == ".." || strings.HasPrefix(p, "../") {
			return "outside the repository"
		}
	}
	info, err := fs.Stat(fsys, p)
	if err != nil {
		return "no such file or directory"
	}
	if anchor == "" || info.IsDir() || !strings.HasSuffix(p, ".md") {
		return ""
	}
	a, err := anchorsOf(p)
	if err != nil {
		return err.Error()
	}
	if !a[anchor] {
		return fmt.Sprintf("no heading with anchor #%s in %s", anchor, p)
	}
	return ""
}

// pageAnchors returns the anchors GitHub gives a page's headings (and its explicit <a name|id> anchors).
func pageAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	return anchors
}

// slug is GitHub's anchor for a heading: the text of its links, lower case, without punctuation but for
// hyphens and underscores, spaces as hyphens.
func slug(h string) string {
	h = mdLinkText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// docsIndex is the page that must link every other page under docs/.
const docsIndex = "docs/README.md"

// unindexed returns one line per page under docs/ that the index does not link (with or without an anchor).
func unindexed(fsys fs.FS, files []string) []string {
	b, err := fs.ReadFile(fsys, docsIndex)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", docsIndex, err)}
	}
	linked := map[string]bool{}
	for _, l := range pageLinks(string(b)) {
		target, _, _ := strings.Cut(l.target, "#")
		if target != "" && !strings.Contains(target, "://") {
			linked[path.Clean(path.Join(path.Dir(docsIndex), target))] = true
		}
	}
	var problems []string
	for _, f := range files {
		if strings.HasPrefix(f, "docs/") && f != docsIndex && !linked[f] {
			problems = append(problems, fmt.Sprintf("%s: not linked from the index %s", f, docsIndex))
		}
	}
	return problems
}
