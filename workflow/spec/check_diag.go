package spec

import (
	"fmt"
	"sort"
	"strings"
)

// Diagnostic is one problem found in a workflow file, with its position.
type Diagnostic struct {
	File    string // path as given to Load or Parse
	Line    int    // 1-based line; 0 when the problem has no position
	Col     int    // 1-based column; 0 when unknown
	Field   string // field path, e.g. spec.tasks[1].with.server; empty for syntax errors
	Message string
	// Policy is true when the problem is a refusal by the network or secret
	// policy (a remote the policy forbids) rather than a malformed file.
	Policy bool
}

// String formats the diagnostic as "file:line:col: field: message".
func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.File)
	fmt.Fprintf(&b, ":%d:%d: ", d.Line, d.Col)
	if d.Field != "" {
		b.WriteString(d.Field)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// Diagnostics is every problem found in a file, sorted by line and column.
// It implements error.
type Diagnostics []Diagnostic

// Error joins the diagnostics, one per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// PolicyOnly reports whether every diagnostic is a policy refusal, so that a
// caller can tell "the file is fine but the policy forbids it" from "the file
// is wrong".
func (ds Diagnostics) PolicyOnly() bool {
	for _, d := range ds {
		if !d.Policy {
			return false
		}
	}
	return len(ds) > 0
}

func (ds Diagnostics) sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Message < b.Message
	})
}

// dedupe drops exact repeats (the same problem reached twice, e.g. through an alias).
func (ds Diagnostics) dedupe() Diagnostics {
	out := ds[:0]
	for i, d := range ds {
		if i > 0 && d == ds[i-1] {
			continue
		}
		out = append(out, d)
	}
	return out
}
