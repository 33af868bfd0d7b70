package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// durationFlag is a duration flag that also takes plain seconds: "90",
// "90s", "1m30s" and "1.5m" are all ninety seconds. Every duration flag of
// the CLI is one (--timeout, --grace, --lease, --poll, --busy-timeout).
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string { return f.d.String() }
func (f durationFlag) Type() string   { return "duration" }

// Set parses s; the range (positive, at least 1s…) is each command's to
// check, naming the flag and the value.
func (f durationFlag) Set(s string) error {
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		*f.d = time.Duration(secs * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 30s or 2m, or seconds such as 30")
	}
	*f.d = d
	return nil
}

// durationVar defines a durationFlag on flags.
func durationVar(cmd *cobra.Command, persistent bool, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs := cmd.Flags()
	if persistent {
		fs = cmd.PersistentFlags()
	}
	fs.Var(durationFlag{p}, name, usage+" (a duration such as 30s or 2m, or plain seconds)")
}
