package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
)

// browser finds a Chromium to render reports with. Outside CI a machine
// without one skips the browser test; under CI (CI set) it fails, since CI
// installs Debian's chromium package (.ci/run).
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set and no chromium is installed (apt-get install -y chromium)")
	}
	t.Skip("no chromium installed (apt-get install -y chromium); CI runs this test")
	return ""
}

// chromium runs the browser headless on the page with args, with a net log
// and console logging; it returns stdout, stderr and the net log.
func chromium(t *testing.T, bin, dir, name string, args ...string) (stdout, stderr, netlog string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	logPath := filepath.Join(dir, name+".netlog.json")
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--user-data-dir=" + filepath.Join(dir, name+".profile"), "--enable-logging=stderr", "--v=1", "--log-net-log=" + logPath}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, errb.String())
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("net log: %v", err)
	}
	return out.String(), errb.String(), string(b)
}

// pageRequests lists the URL requests of a Chromium net log that a page
// made: the browser's own background fetches (updates, time, accounts)
// carry the initiator "not an origin"; a page's requests carry its origin
// ("null" for a file:// page). The control test proves the split.
func pageRequests(t *testing.T, netlog string) (page, browser []string) {
	t.Helper()
	var l struct {
		Constants struct {
			EventTypes map[string]int `json:"logEventTypes"`
		} `json:"constants"`
		Events []struct {
			Type   int `json:"type"`
			Params struct {
				URL       string `json:"url"`
				Initiator string `json:"initiator"`
			} `json:"params"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(netlog), &l); err != nil {
		// A log cut short ends inside its events array.
		if err2 := json.Unmarshal([]byte(strings.TrimRight(strings.TrimSpace(netlog), ",")+"]}"), &l); err2 != nil {
			t.Fatalf("net log: %v", err)
		}
	}
	start, ok := l.Constants.EventTypes["URL_REQUEST_START_JOB"]
	if !ok {
		t.Fatal("net log has no URL_REQUEST_START_JOB event type")
	}
	for _, e := range l.Events {
		if e.Type != start || e.Params.URL == "" { // the end of a job has no params
			continue
		}
		if e.Params.Initiator == "not an origin" {
			browser = append(browser, e.Params.URL)
		} else {
			page = append(page, e.Params.URL)
		}
	}
	return page, browser
}

// TestReportInBrowserControl proves the browser test's instruments on a page
// that does load something (an image from a server on 127.0.0.1, no CSP)
// and throws: the net log shows the request as the page's, the server
// counts it, and the browser's log shows the script error.
func TestReportInBrowserControl(t *testing.T) {
	bin := browser(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	dir := t.TempDir()
	page := filepath.Join(dir, "control.html")
	if err := os.WriteFile(page, []byte(`<!DOCTYPE html><title>control</title><img src="`+srv.URL+`/probe.png"><script>throw new Error("control")</script>`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, netlog := chromium(t, bin, dir, "control", "--dump-dom", "file://"+page)
	if !strings.Contains(stderr, "Uncaught Error: control") {
		t.Errorf("control: the browser's log does not show the script error:\n%s", stderr)
	}
	reqs, _ := pageRequests(t, netlog)
	if hits.Load() == 0 || len(reqs) == 0 || !strings.HasPrefix(reqs[0], srv.URL) {
		t.Fatalf("control: server hits %d, page requests %v: the instruments do not see a page's request", hits.Load(), reqs)
	}
}

// TestReportInBrowser renders the report of the demo run (go-sdk server),
// of a run with several tasks, a redispatch and an uncertain call, of
// one whose tasks ran concurrently with a redispatch and an uncertain call,
// and of one whose parallel tasks took milliseconds before a second-long
// retry wait (drawn side by side, wide enough to see, the wait shortened)
// in headless Chromium: the DOM after rendering has one lane per task and
// its bars in time order (the concurrent run's bars overlapping), the
// browser requested no URL but the page itself, and logged no console
// message (no script error, no CSP violation), on screen and printed to
// PDF. The screenshots and PDFs stay in a temp dir (AGENTCTL_REPORT_DIR
// keeps them: CI sets it).
func TestReportInBrowser(t *testing.T) {
	bin := browser(t)
	dir := os.Getenv("AGENTCTL_REPORT_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	_, url := demotest.StartTest(t, demoserver.Options{})
	demoDB := filepath.Join(t.TempDir(), "demo.db")
	demoID := runFor(t, 0, "run", writeWorkflow(t, url), "--input", "query=event sourcing", "--db", demoDB)
	mixedDB, mixedID := mixedRun(t)
	concDB := filepath.Join(t.TempDir(), "concurrent.db")
	concID := concurrentRun(t, concDB, nil)
	shortDB := filepath.Join(t.TempDir(), "parallel.db")
	shortID := shortParallelRun(t, shortDB)

	for _, c := range []struct {
		name, db, runID string
		lanes           []string
		overlap         bool // the first lane's bar overlaps every other lane's; the lanes in any order
	}{
		{"demo", demoDB, demoID, []string{"find", "fetch", "summarize"}, false},
		{"mixed", mixedDB, mixedID, []string{"prep", "flaky", "risky"}, false},
		{"concurrent", concDB, concID, []string{"prep", "flaky", "risky"}, true},
		// Tasks of a few milliseconds side by side, then a second-long retry wait.
		{"parallel", shortDB, shortID, []string{"a", "b", "c", "later"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := filepath.Join(dir, c.name+".html")
			if _, stderr, code := cli(t, "inspect", c.runID, "--db", c.db, "--html", "-o", page); code != 0 {
				t.Fatalf("inspect --html: exit %d %s", code, stderr)
			}
			fileURL := "file://" + page
			dom, stderr, netlog := chromium(t, bin, dir, c.name+"-dom", "--dump-dom", fileURL)
			checkLanes(t, dom, c.lanes, !c.overlap && c.name != "parallel")
			if c.overlap {
				_, bars := laneBars(t, dom)
				checkOverlap(t, bars, c.lanes[0], c.lanes[1:]...)
			}
			if c.name == "parallel" { // as the browser rendered it
				_, bars := laneBars(t, dom)
				checkOverlap(t, bars, "a", "b", "c")
				checkSideBySide(t, dom)
			}
			checkQuiet(t, stderr, netlog)

			shot := filepath.Join(dir, c.name+".png")
			_, stderr, netlog = chromium(t, bin, dir, c.name+"-shot", "--hide-scrollbars", "--window-size=1280,1800", "--screenshot="+shot, fileURL)
			checkQuiet(t, stderr, netlog)
			f, err := os.Open(shot)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatalf("screenshot: %v", err)
			}
			if b := img.Bounds(); b.Dx() != 1280 {
				t.Errorf("screenshot %v, want 1280 wide", b)
			}
			t.Logf("screenshot %s", shot)

			// Printed (the page's print styles): a PDF of whole pages, and
			// still no request and no console message.
			pdf := filepath.Join(dir, c.name+".pdf")
			_, stderr, netlog = chromium(t, bin, dir, c.name+"-pdf", "--no-pdf-header-footer", "--print-to-pdf="+pdf, fileURL)
			checkQuiet(t, stderr, netlog)
			b, err := os.ReadFile(pdf)
			if err != nil {
				t.Fatal(err)
			}
			pages := len(regexp.MustCompile(`/Type\s*/Page\b`).FindAll(b, -1))
			if !bytes.HasPrefix(b, []byte("%PDF-")) || pages == 0 {
				t.Errorf("printed: %d bytes, %d pages, not a PDF of the report", len(b), pages)
			}
			t.Logf("printed %s: %d pages", pdf, pages)
		})
	}
}

// checkLanes asserts the rendered DOM: no script, the lanes named (in order
// when ordered: tasks that start together may start in any order), each with
// its bars in time order, and lanes starting in order.
func checkLanes(t *testing.T, dom string, want []string, ordered bool) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	var lanes []string
	var laneStart []int64
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		if n.Data == "script" {
			t.Error("a script element in the rendered DOM")
		}
		if n.Data != "g" || attr(n, "class") != "lane" {
			continue
		}
		lanes = append(lanes, attr(n, "data-task"))
		var starts []int64
		var xs []float64
		for b := range n.Descendants() {
			if b.Type != html.ElementNode || b.Data != "rect" || !strings.HasPrefix(attr(b, "class"), "bar ") {
				continue
			}
			s, err1 := strconv.ParseInt(attr(b, "data-start-us"), 10, 64)
			x, err2 := strconv.ParseFloat(attr(b, "x"), 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("bar %v: %v %v", b.Attr, err1, err2)
			}
			if len(starts) > 0 && (s < starts[len(starts)-1] || x < xs[len(xs)-1]) {
				t.Errorf("lane %s: bar at %dµs (x %v) after one at %dµs (x %v)", lanes[len(lanes)-1], s, x, starts[len(starts)-1], xs[len(xs)-1])
			}
			starts, xs = append(starts, s), append(xs, x)
		}
		if len(starts) == 0 {
			t.Errorf("lane %s has no bar", lanes[len(lanes)-1])
			continue
		}
		if len(laneStart) > 0 && starts[0] < laneStart[len(laneStart)-1] {
			t.Errorf("lane %s starts at %dµs, before the lane above it (%dµs)", lanes[len(lanes)-1], starts[0], laneStart[len(laneStart)-1])
		}
		laneStart = append(laneStart, starts[0])
	}
	if !ordered {
		lanes, want = slices.Sorted(slices.Values(lanes)), slices.Sorted(slices.Values(want))
	}
	if strings.Join(lanes, ",") != strings.Join(want, ",") {
		t.Errorf("lanes %v, want %v", lanes, want)
	}
}

// checkQuiet asserts the browser requested nothing but the page and logged
// no console message.
func checkQuiet(t *testing.T, stderr, netlog string) {
	t.Helper()
	page, browser := pageRequests(t, netlog)
	for _, u := range page {
		t.Errorf("the page requested %s", u)
	}
	t.Logf("the browser's own background requests (not the page's): %d", len(browser))
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") || strings.Contains(line, "Content Security Policy") {
			t.Errorf("browser console: %s", line)
		}
	}
}
