package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's root, two folders above this package.
const root = "../.."

// maxReadmeLines is the README's budget: the reference lives in docs/.
const maxReadmeLines = 300

func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkReadme(string(b)); err != nil {
		t.Fatal(err)
	}
}

func TestLinksResolve(t *testing.T) {
	files := []string{filepath.Join(root, "README.md")}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("docscheck: no docs/*.md found")
	}
	files = append(files, docs...)
	for _, f := range files {
		for _, err := range checkLinks(root, f, f == files[0]) {
			t.Error(err)
		}
	}
}

// TestCheckersCatchBreakage proves the two checks above fail on what they guard against.
func TestCheckersCatchBreakage(t *testing.T) {
	long := "# X\n\n```sh\nmake train\nmake test\n```\n" + strings.Repeat("line\n", maxReadmeLines)
	if err := checkReadme(long); err == nil || !strings.Contains(err.Error(), "lines") {
		t.Errorf("a README of %d lines passed: %v", strings.Count(long, "\n"), err)
	}
	late := "# X\n" + strings.Repeat("prose\n", 60) + "make train\nmake test\n"
	if err := checkReadme(late); err == nil || !strings.Contains(err.Error(), "make train") {
		t.Errorf("a README with the commands at line 61 passed: %v", err)
	}
	if err := checkReadme("# X\n\nmake train\nmake test\n"); err != nil {
		t.Errorf("a good README failed: %v", err)
	}

	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/cli.md", "# The command line\n\n## `--json` output\n\nBack to [the README](../README.md#the-two-commands).\n")
	write("pkg/x.go", "package pkg\n")
	write("README.md", strings.Join([]string{
		"# Stoke", "", "## The two commands", "",
		"[cli](docs/cli.md) [json](docs/cli.md#--json-output) [self](#the-two-commands) [code](pkg/x.go)",
		"[gone](docs/gone.md) [bad anchor](docs/cli.md#json) [escape](../outside.md) [web](https://example.com/)",
		"`[in code](nowhere.md)`", "```", "[in a block](nowhere.md)", "```",
	}, "\n"))
	var got []string
	for _, f := range []string{"README.md", "docs/cli.md"} {
		for _, err := range checkLinks(dir, filepath.Join(dir, f), f == "README.md") {
			got = append(got, err.Error())
		}
	}
	want := []string{"docs/gone.md", "docs/cli.md#json", "../outside.md", "https://example.com/"}
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("error %d = %q, want one naming %s", i, got[i], w)
		}
	}
}

// checkReadme reports a README over budget or one whose two everyday commands are not near the top.
func checkReadme(text string) error {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) >= maxReadmeLines {
		return fmt.Errorf("docscheck: README.md has %d lines, want under %d (move reference material to docs/)", len(lines), maxReadmeLines)
	}
	top := strings.Join(lines[:min(len(lines), 40)], "\n")
	for _, cmd := range []string{"make train", "make test"} {
		if !strings.Contains(top, cmd) {
			return fmt.Errorf("docscheck: README.md does not show %q in its first 40 lines", cmd)
		}
	}
	return nil
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
)

// checkLinks returns an error for each link of the Markdown file that does not resolve inside
// repo: a relative target that is not a file or folder of the repository, an #anchor that is no
// heading of its Markdown target, and, when localOnly, any link that leaves the repository.
func checkLinks(repo, file string, localOnly bool) []error {
	b, err := os.ReadFile(file)
	if err != nil {
		return []error{err}
	}
	rel, _ := filepath.Rel(repo, file)
	absRepo, err := filepath.Abs(repo)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, l := range links(string(b)) {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("docscheck: %s:%d: link %s: %s", rel, l.line, l.target, fmt.Sprintf(format, args...)))
		}
		if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
			if localOnly {
				fail("leaves the repository (link to a file in it instead)")
			}
			continue
		}
		path, anchor, _ := strings.Cut(l.target, "#")
		target := file
		if path != "" {
			target = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
			abs, err := filepath.Abs(target)
			if err != nil || (abs != absRepo && !strings.HasPrefix(abs, absRepo+string(filepath.Separator))) {
				fail("points outside the repository")
				continue
			}
			if _, err := os.Stat(target); err != nil {
				fail("no such file")
				continue
			}
		}
		if anchor == "" || !strings.HasSuffix(target, ".md") {
			continue
		}
		tb, err := os.ReadFile(target)
		if err != nil {
			fail("%v", err)
			continue
		}
		if !anchors(string(tb))[anchor] {
			fail("no heading with anchor #%s", anchor)
		}
	}
	return errs
}

type link struct {
	line   int
	target string
}

// links returns the Markdown file's link targets, outside fenced code blocks and code spans.
func links(text string) []link {
	var out []link
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{i + 1, m[1]})
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			out = append(out, link{i + 1, m[1]})
		}
	}
	return out
}

// anchors returns the anchors GitHub gives the file's headings: lower case, punctuation but '-'
// and '_' dropped, spaces as '-', a repeated anchor suffixed -1, -2, ...
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f:
				b.WriteRune(r)
			}
		}
		a := b.String()
		for n := 1; out[a]; n++ {
			a = fmt.Sprintf("%s-%d", b.String(), n)
		}
		out[a] = true
	}
	return out
}
