package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ParseInputsLine parses one line of a JSON-lines inputs file (submit
// --inputs): a JSON object of input names to values, number text kept
// exact as in LoadInputsFile. name and line (1-based) name it in errors.
func ParseInputsLine(name string, line int, src []byte) (map[string]any, error) {
	t := bytes.TrimSpace(src)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return nil, fmt.Errorf("%s:%d: expected a JSON object of input names to values on one line", name, line)
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var x map[string]any
	if err := dec.Decode(&x); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line, err)
	}
	return normalize(x).(map[string]any), nil
}
