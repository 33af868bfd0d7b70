package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/agentctl/agentctl/internal/termtext"
)

//go:embed report.html.tmpl
var pageSource string

// CSP is the page's Content-Security-Policy: nothing may be loaded from
// anywhere (no scripts at all, no fonts, no frames, no remote images);
// only the page's own inline style and data: images are allowed.
const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

// pageTemplate parses the page's template the first time a page is
// written: every agentctl process links this package, few write a report.
var pageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
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
})

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
// is escaped by html/template; then the page passes the one sanitizer for
// text shown to people (internal/termtext), so control characters and
// Unicode bidi controls in remote text show as U+FFFD and can neither hide
// nor reorder what the page says. The template itself holds none of them.
func Write(w io.Writer, r *Report) error {
	p := page{Report: r, CSP: CSP, Timeline: layout(r),
		States: []string{"succeeded", "failed", "uncertain", "cancelled", "running"}}
	for _, k := range markOrder {
		p.Legend = append(p.Legend, legendItem{Kind: k, Name: markNames[k]})
	}
	var b bytes.Buffer
	if err := pageTemplate().Execute(&b, p); err != nil {
		return fmt.Errorf("render report of run %s: %w", r.Doc.Run.RunID, err)
	}
	_, err := io.WriteString(w, termtext.Block(b.String()))
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
