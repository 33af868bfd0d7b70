package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// maxInputsLine bounds one line of --inputs (as an inputs file).
const maxInputsLine = spec.MaxFileBytes

// openInputLines opens the JSON-lines file of --inputs ("-" = stdin) and
// returns it with the name errors give it and the function that closes it.
func openInputLines(path string) (io.Reader, string, func(), error) {
	if path == "-" {
		return os.Stdin, "stdin", func() {}, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, "", nil, &exitError{code: workflow.ExitInvalid, err: fmt.Errorf("--inputs: %w", err)}
	}
	return fh, path, func() { _ = fh.Close() }, nil
}

// eachInputLine calls fn with the line number and the inputs of each line
// of r that is not blank, in order, checked against wf as --input values
// are (submit --inputs, run --inputs). It stops at the first line that
// does not parse or check, with exit 2 naming name:LINE and the field at
// fault, or at fn's first error, which it returns as it is.
func eachInputLine(r io.Reader, name string, wf *spec.Workflow, fn func(line int, inputs map[string]any) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxInputsLine)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 || len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		given, err := spec.ParseInputsLine(name, line, sc.Bytes())
		if err != nil {
			return &exitError{code: workflow.ExitInvalid, err: err}
		}
		inputs, err := spec.ResolveInputs(wf, given)
		if err != nil {
			return &exitError{code: workflow.ExitInvalid, err: fmt.Errorf("%s:%d: %s: %w", name, line, wf.File, err)}
		}
		if err := fn(line, inputs); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return &exitError{code: workflow.ExitInvalid, err: fmt.Errorf("%s:%d: %w", name, line+1, err)}
	}
	return nil
}
