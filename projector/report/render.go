package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

//go:embed report.html.tmpl
var pageSource string

// CSP is the page's Content-Security-Policy: nothing may be loaded from
// anywhere (no scripts at all, no fonts, no frames, no remote images);
// only the page's own inline style and data: images are allowed.
const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
	},
	"dur":   func(a, b time.Time) string { return Dur(b.Sub(a)) },
	"str":   func(s *string) string { return derefOr(s, "-") },
	"int":   func(i *int) string { return derefIntOr(i, "-") },
	"short": short,
	"mark":  func(kind string) string { return markNames[kind] },
}).Parse(pageSource))

// page is what the template reads: the report and its drawing.
type page struct {
	*Report
	CSP      string
	Timeline svgTimeline
	Legend   []legendItem
	States   []string
	Marks    []callMarkRow
}

type legendItem struct {
	Kind, Name string
}

// callMarkRow is one marker kind of one call as the call's summary lists it.
type callMarkRow struct {
	EffectID    string
	Kind        string
	Count       int
	First, Last time.Time
}

// Write renders r as one self-contained HTML page (inline CSS and SVG, no
// script, a CSP that forbids every remote source). Every string from the log
// is escaped by html/template; on top of that, control characters and
// Unicode bidi controls are written as visible \uXXXX text, so remote text
// can neither hide nor reorder what the page says.
func Write(w io.Writer, r *Report) error {
	p := page{Report: r, CSP: CSP, Timeline: layout(r),
		States: []string{"succeeded", "failed", "uncertain", "cancelled", "running"}}
	for _, k := range markOrder {
		p.Legend = append(p.Legend, legendItem{Kind: k, Name: markNames[k]})
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p); err != nil {
		return fmt.Errorf("render report of run %s: %w", r.Doc.Run.RunID, err)
	}
	_, err := w.Write(visible(b.Bytes()))
	return err
}

// MarkRows lists c's markers in legend order, for the call's summary.
func (c *Call) MarkRows() []callMarkRow {
	var out []callMarkRow
	for _, k := range markOrder {
		if m := c.Marks[k]; m != nil {
			out = append(out, callMarkRow{EffectID: c.EffectID, Kind: k, Count: m.Count, First: m.First, Last: m.Last})
		}
	}
	return out
}

// BudgetText says the call's redispatch budget ("" when not known).
func (c *Call) BudgetText() string {
	switch {
	case c.Budget == nil:
		return ""
	case *c.Budget == 0:
		return "of a budget of 0 (" + c.Idempotency + " calls are never sent twice)"
	}
	return "of a budget of " + strconv.Itoa(*c.Budget)
}

// RemoteList is the remotes with reconnects, sorted, for the header.
func (r *Report) RemoteList() []string {
	var out []string
	for k, n := range r.Reconnects {
		out = append(out, k+" "+strconv.Itoa(n))
	}
	sort.Strings(out)
	return out
}

// visible rewrites C0 and C1 controls (but tab, newline and carriage
// return), DEL, the Unicode bidi controls and the line and paragraph
// separators as the six characters \uXXXX. It runs on the rendered page,
// after html/template escaped it, so no remote string can slip past it; the
// template itself holds none of these characters.
func visible(b []byte) []byte {
	if !needsRewrite(b) {
		return b
	}
	out := make([]byte, 0, len(b)+64)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if hidden(r) {
			out = append(out, fmt.Sprintf(`\u%04x`, r)...)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// needsRewrite is the fast path: most pages have nothing to rewrite. The
// hidden runes are ASCII controls or start with byte 0xc2 (C1), 0xd8
// (U+061C) or 0xe2 (U+200E, U+200F, U+2028-U+202E, U+2066-U+2069).
func needsRewrite(b []byte) bool {
	for i, c := range b {
		switch {
		case c < 0x20 && c != '\t' && c != '\n' && c != '\r', c == 0x7f:
			return true
		case c == 0xc2 || c == 0xd8 || c == 0xe2:
			if r, _ := utf8.DecodeRune(b[i:]); hidden(r) {
				return true
			}
		}
	}
	return false
}

func hidden(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

func derefOr(s *string, or string) string {
	if s == nil {
		return or
	}
	return *s
}

func derefIntOr(i *int, or string) string {
	if i == nil {
		return or
	}
	return strconv.Itoa(*i)
}
