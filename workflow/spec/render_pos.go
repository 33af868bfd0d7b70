package spec

import (
	"fmt"
	"strings"
)

// TemplateError is a template that failed to render during a run (a
// missing key, a wrong type, a task without output), with where the
// template is written in the workflow file.
type TemplateError struct {
	File      string
	Line, Col int    // of the template itself when it can be found on its line, else of the string
	Field     string // e.g. spec.tasks[1].with.arguments.id
	Err       error
}

// Error reads "file:line:col: field: template ...: what is wrong".
func (e *TemplateError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s: %v", e.File, e.Line, e.Col, e.Field, e.Err)
}

// Unwrap returns the rendering error, so callers can still match it.
func (e *TemplateError) Unwrap() error { return e.Err }

// RenderArguments renders the with.arguments of the task with id taskID
// as Render does; a template that fails is a *TemplateError naming its
// position in the file.
func (w *Workflow) RenderArguments(taskID string, s Scope) (any, error) {
	i := w.taskIndex(taskID)
	if i < 0 {
		return nil, fmt.Errorf("render arguments: task %q is not in the workflow", taskID)
	}
	return w.renderAt(TaskField(i, "with.arguments"), w.Spec.Tasks[i].With.Arguments, s)
}

// RenderOutputs renders spec.outputs as Render does; a template that fails
// is a *TemplateError naming its position in the file.
func (w *Workflow) RenderOutputs(s Scope) (any, error) {
	return w.renderAt("spec.outputs", w.Spec.Outputs, s)
}

func (w *Workflow) renderAt(field string, v any, s Scope) (any, error) {
	return renderTree(field, v, s, func(field string, ref *tref, err error) error {
		line, col := w.Position(field)
		if ref != nil {
			col = w.templateCol(line, col, ref.text)
		}
		return &TemplateError{File: w.File, Line: line, Col: col, Field: field, Err: err}
	})
}

// templateCol returns the column of text on the given line of the source
// at or after col (the start of the string holding it), or col when the
// template is not found there as written (a multi-line or escaped scalar).
func (w *Workflow) templateCol(line, col int, text string) int {
	if line < 1 || col < 1 {
		return col
	}
	lines := strings.SplitN(string(w.Source), "\n", line+1)
	if len(lines) < line {
		return col
	}
	l := lines[line-1]
	if col-1 > len(l) {
		return col
	}
	if i := strings.Index(l[col-1:], text); i >= 0 {
		return col + i
	}
	return col
}
