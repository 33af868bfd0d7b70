package spec

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// TestParse_BadCatalogue parses every broken file under testdata/lang/bad and
// compares all diagnostics with testdata/lang/bad.golden (-update rewrites it).
func TestParse_BadCatalogue(t *testing.T) {
	files, err := filepath.Glob("testdata/lang/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("catalogue has %d files, want at least 30", len(files))
	}
	var got strings.Builder
	for _, f := range files {
		name := "bad/" + filepath.Base(f)
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		w, err := Parse(name, src)
		if err == nil {
			t.Errorf("%s: Parse succeeded, want diagnostics", name)
			continue
		}
		if w != nil {
			t.Errorf("%s: Parse returned a workflow with an error", name)
		}
		var ds *Diagnostics
		if !errors.As(err, &ds) {
			t.Errorf("%s: error is %T, want *Diagnostics", name, err)
			continue
		}
		for _, d := range *ds {
			if d.File != name || d.Line < 1 || d.Col < 1 || d.Message == "" {
				t.Errorf("%s: diagnostic without file, position or message: %#v", name, d)
			}
		}
		got.WriteString("== " + name + "\n" + err.Error() + "\n")
	}
	golden(t, "testdata/lang/bad.golden", got.String())
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -run %s -update to accept):\n%s", path, t.Name(), diffLines(string(want), got))
	}
}

// diffLines lists the lines only in want (-) and only in got (+).
func diffLines(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(got, "\n") {
		count[l]--
	}
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if count[l] > 0 {
			b.WriteString("- " + l + "\n")
			count[l]--
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if count[l] < 0 {
			b.WriteString("+ " + l + "\n")
			count[l]++
		}
	}
	return b.String()
}
