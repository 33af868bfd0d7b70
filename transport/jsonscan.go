package transport

import (
	"bytes"
	"encoding/json"
)

// members calls fn with the name and raw value of each member of the JSON
// object b, in order. b must already be one valid JSON object in valid
// UTF-8 (json.Valid, utf8.Valid, first byte '{'), so the scan only finds boundaries: one pass, no
// allocation but the names that carry escapes. It replaces a json.Decoder
// token walk that cost more than the rest of a progress frame's path.
func members(b []byte, fn func(key string, raw json.RawMessage) error) error {
	i := skipSpace(b, 1)
	if i >= len(b) || b[i] == '}' {
		return nil
	}
	for i < len(b) {
		end := stringEnd(b, i)
		key, ok := jsonString(b[i:end])
		if !ok {
			return malformed("member name %s", truncate(string(b[i:end]), 64))
		}
		i = skipSpace(b, skipSpace(b, end)+1) // past ':'
		vend := valueEnd(b, i)
		if err := fn(key, json.RawMessage(b[i:vend])); err != nil {
			return err
		}
		i = skipSpace(b, vend)
		if i >= len(b) || b[i] == '}' {
			return nil
		}
		i = skipSpace(b, i+1) // past ','
	}
	return nil
}

// jsonString decodes a raw JSON string; ok is false if raw is not one.
func jsonString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string that starts at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// seenKeys detects a duplicate member name: a short list for the handful
// of members a JSON-RPC message has, a map past that.
type seenKeys struct {
	list []string
	set  map[string]bool
}

// add records key and reports whether it was already there.
func (s *seenKeys) add(key string) bool {
	if s.set != nil {
		if s.set[key] {
			return true
		}
		s.set[key] = true
		return false
	}
	for _, k := range s.list {
		if k == key {
			return true
		}
	}
	s.list = append(s.list, key)
	if len(s.list) > 16 {
		s.set = make(map[string]bool, 32)
		for _, k := range s.list {
			s.set[k] = true
		}
	}
	return false
}
