package api

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/proctest"
)

// This file drives headless Chromium over the Chrome DevTools Protocol,
// spoken on the pipe Chromium opens with --remote-debugging-pipe (it reads
// commands from fd 3 and writes answers to fd 4, each message NUL-ended).
// A pipe needs no port, no websocket and no third-party client.

// chromiumCandidates are the executables tried, in order, when
// BUDGETD_CHROMIUM does not name one.
var chromiumCandidates = []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"}

// findChromium returns the browser to run, failing the test (never skipping
// it) when there is none.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("BUDGETD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range chromiumCandidates {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("headless Chromium is needed for the web UI test and was not found (tried %s): "+
		"run `make test-setup` (scripts/install-ui-test-deps.sh installs Debian's chromium), "+
		"or set BUDGETD_CHROMIUM to a Chromium executable", strings.Join(chromiumCandidates, ", "))
	return ""
}

// cdpMessage is any message on the pipe: a command, its answer or an event.
type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// browser is one headless Chromium process.
type browser struct {
	cmd    *exec.Cmd
	toB    *os.File // our end of Chromium's fd 3
	fromB  *os.File // our end of Chromium's fd 4
	stderr *proctest.Output
	read   chan struct{} // closed when the reader goroutine ends

	mu       sync.Mutex
	next     int64
	pending  map[int64]chan cdpMessage
	problems []string // console errors, exceptions and failed loads, in order
}

// startBrowser starts headless Chromium with a fresh profile and stops it
// when the test ends.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	bin := findChromium(t)
	profile := t.TempDir()
	// Chromium's fd 3 (commands in) and fd 4 (answers out).
	cmdR, toB, err := os.Pipe()
	require.NoError(t, err)
	fromB, cmdW, err := os.Pipe()
	require.NoError(t, err)
	b := &browser{toB: toB, fromB: fromB, stderr: &proctest.Output{}, read: make(chan struct{}), pending: map[int64]chan cdpMessage{}}
	b.cmd = exec.Command(bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
		"--force-color-profile=srgb", "--font-render-hinting=none",
		"--user-data-dir="+profile, "--remote-debugging-pipe", "about:blank")
	b.cmd.ExtraFiles = []*os.File{cmdR, cmdW}
	b.cmd.Stdout = b.stderr
	b.cmd.Stderr = b.stderr
	// Its own process group, so the renderer and helper processes it starts
	// go with it if it has to be killed.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, b.cmd.Start(), "start %s", bin)
	cmdR.Close()
	cmdW.Close()
	go b.readLoop()
	t.Cleanup(func() { b.close(t) })

	// The first answer proves the pipe works; a browser that cannot start
	// says why on stderr.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var version struct {
		Product string `json:"product"`
	}
	if err := b.call(ctx, "", "Browser.getVersion", nil, &version); err != nil {
		t.Fatalf("chromium (%s) did not answer on its DevTools pipe: %v\nits output:\n%s", bin, err, b.stderr.String())
	}
	t.Logf("browser: %s", version.Product)
	return b
}

func (b *browser) readLoop() {
	defer close(b.read)
	r := bufio.NewReaderSize(b.fromB, 1<<20)
	for {
		raw, err := r.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var m cdpMessage
		if err := json.Unmarshal(raw[:len(raw)-1], &m); err != nil {
			b.note("undecodable DevTools message: %v", err)
			continue
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.pending[m.ID]
			delete(b.pending, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		b.event(m)
	}
}

func (b *browser) note(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// event records what a page reports as going wrong.
func (b *browser) event(m cdpMessage) {
	switch m.Method {
	case "Runtime.exceptionThrown":
		var p struct {
			ExceptionDetails struct {
				Text      string `json:"text"`
				URL       string `json:"url"`
				Line      int    `json:"lineNumber"`
				Exception *struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		_ = json.Unmarshal(m.Params, &p)
		d := p.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		b.note("exception: %s (%s:%d)", msg, d.URL, d.Line)
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Type != "error" && p.Type != "assert" && p.Type != "warning" {
			return
		}
		var parts []string
		for _, a := range p.Args {
			if a.Description != "" {
				parts = append(parts, a.Description)
			} else {
				parts = append(parts, fmt.Sprint(a.Value))
			}
		}
		b.note("console.%s: %s", p.Type, strings.Join(parts, " "))
	case "Log.entryAdded":
		var p struct {
			Entry struct {
				Level  string `json:"level"`
				Source string `json:"source"`
				Text   string `json:"text"`
				URL    string `json:"url"`
			} `json:"entry"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Entry.Level == "error" || p.Entry.Level == "warning" {
			b.note("log %s (%s): %s %s", p.Entry.Level, p.Entry.Source, p.Entry.Text, p.Entry.URL)
		}
	case "Inspector.targetCrashed":
		b.note("the page crashed")
	}
}

// takeProblems returns and forgets what went wrong since the last call.
func (b *browser) takeProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

// call sends one command (to the browser, or to a page's session) and
// decodes its result into out (when not nil).
func (b *browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	forget := func() {
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
	}

	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		forget()
		return fmt.Errorf("encode %s: %w", method, err)
	}
	if _, err := b.toB.Write(append(raw, 0)); err != nil {
		forget()
		return fmt.Errorf("send %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: the browser closed its pipe", method)
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				return fmt.Errorf("decode %s result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		forget()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// close asks the browser to quit and waits for it; one that does not quit
// in time is killed with its process group.
func (b *browser) close(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.call(ctx, "", "Browser.close", nil, nil)
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Logf("chromium did not exit after Browser.close; killing process group %d", b.cmd.Process.Pid)
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	b.toB.Close()
	<-b.read
	b.fromB.Close()
}

// tab is one page (target) of the browser, attached in flat session mode.
type tab struct {
	b       *browser
	session string
}

// newTab opens a page with the given viewport and enables the domains whose
// events report errors.
func (b *browser) newTab(ctx context.Context, width, height int) (*tab, error) {
	var created struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &created); err != nil {
		return nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": created.TargetID, "flatten": true}, &attached); err != nil {
		return nil, err
	}
	tb := &tab{b: b, session: attached.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		if err := tb.call(ctx, m, nil, nil); err != nil {
			return nil, err
		}
	}
	if err := tb.setViewport(ctx, width, height); err != nil {
		return nil, err
	}
	return tb, nil
}

func (tb *tab) call(ctx context.Context, method string, params, out any) error {
	return tb.b.call(ctx, tb.session, method, params, out)
}

func (tb *tab) setViewport(ctx context.Context, width, height int) error {
	return tb.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false,
	}, nil)
}

// navigate loads url and returns once the navigation is committed.
func (tb *tab) navigate(ctx context.Context, url string) error {
	var res struct {
		ErrorText string `json:"errorText"`
	}
	if err := tb.call(ctx, "Page.navigate", map[string]any{"url": url}, &res); err != nil {
		return err
	}
	if res.ErrorText != "" {
		return fmt.Errorf("navigate to %s: %s", url, res.ErrorText)
	}
	return nil
}

// eval evaluates a JavaScript expression (awaiting a promise) in the page
// and decodes its JSON value into out (when not nil).
func (tb *tab) eval(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := tb.call(ctx, "Runtime.evaluate", map[string]any{
		"expression": expr, "returnByValue": true, "awaitPromise": true,
	}, &res)
	if err != nil {
		return err
	}
	if d := res.ExceptionDetails; d != nil {
		msg := d.Text
		if d.Exception != nil {
			msg = d.Exception.Description
		}
		return fmt.Errorf("evaluate %q: %s", expr, msg)
	}
	if out != nil && len(res.Result.Value) > 0 {
		return json.Unmarshal(res.Result.Value, out)
	}
	return nil
}

// waitFor polls a JavaScript condition until it holds or ctx ends. Errors
// while a navigation replaces the document are retried.
func (tb *tab) waitFor(ctx context.Context, cond string) error {
	tick := time.NewTicker(40 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		var ok bool
		err := tb.eval(ctx, "Boolean("+cond+")", &ok)
		if err == nil && ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("wait for %s: %w (last error: %v)", cond, ctx.Err(), last)
			}
			return fmt.Errorf("wait for %s: %w", cond, ctx.Err())
		case <-tick.C:
		}
	}
}

// screenshot captures the whole page (up to maxHeight CSS pixels tall) as PNG.
func (tb *tab) screenshot(ctx context.Context, width, maxHeight int) ([]byte, error) {
	var height int
	if err := tb.eval(ctx, "Math.ceil(document.documentElement.scrollHeight)", &height); err != nil {
		return nil, err
	}
	height = min(max(height, 200), maxHeight)
	if err := tb.setViewport(ctx, width, height); err != nil {
		return nil, err
	}
	var shot struct {
		Data string `json:"data"`
	}
	if err := tb.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		return nil, err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return nil, fmt.Errorf("decode screenshot: %w", err)
	}
	if len(png) == 0 {
		return nil, errors.New("empty screenshot")
	}
	return png, nil
}
