// Package report writes the HTML report of a run (`agentctl inspect RUN
// --html`): one self-contained page with a header, a timeline of tasks,
// attempts and calls, each call's state machine path, the sessions, the
// bounded stream events and the outputs.
//
// The caller's duties: open the database (any backend, with its key for an
// encrypted log), call [Build] with the run id and [Options] from the
// command layer (the reconcile commands and the redispatch budget belong to
// packages above this one), then [Write] the page. Build reads the log once,
// through projector.InspectEach: the inspect document (bounded as inspect
// is) and, beside it, the timeline fold and the hash chain check. Nothing is
// fetched when the page is opened: no script, inline CSS and SVG, and a
// Content-Security-Policy that forbids every remote source.
//
// Remote text is data: html/template escapes it, and the rendered page
// passes internal/termtext, which shows control and bidi characters as
// U+FFFD.
package report
