package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// table lays out rows of already-sanitised cells in columns as wide as
// their widest cell (whatever a tool name's length), with optional note
// lines under a row.
type table struct {
	head  []string
	rows  [][]string
	notes []string
}

func (t *table) add(note string, cells ...string) {
	t.rows = append(t.rows, cells)
	t.notes = append(t.notes, note)
}

// write prints the header (when set) and the rows, each line after indent.
func (t *table) write(w io.Writer, indent string) {
	all := t.rows
	if t.head != nil {
		all = append([][]string{t.head}, t.rows...)
	}
	var width []int
	for _, cells := range all {
		for i, c := range cells {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range cells {
			b.WriteString(c)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)+2))
			}
		}
		fmt.Fprintln(w, b.String())
	}
	if t.head != nil {
		line(t.head)
	}
	for i, cells := range t.rows {
		line(cells)
		if t.notes[i] == "" {
			continue
		}
		for _, l := range strings.Split(t.notes[i], "\n") {
			fmt.Fprintf(w, "%s    %s\n", indent, l)
		}
	}
}
