package groundtruth

import "time"

// Log is everything a simulator observed of one run. Index fields (Parent,
// Call) refer to positions in Calls and Invs; -1 means none.
type Log struct {
	Requests []*Request
	Calls    []*Call
	Invs     []*Invocation
}

// Request is one request sent at the edge.
type Request struct {
	Trace    string
	Start    time.Time
	Deadline time.Time // the edge's deadline; zero when it set none
}

// Call is one call attempt, from the caller's side.
type Call struct {
	Trace          string
	Caller, Callee string
	Parent         int // invocation that made the call; -1 for the edge
	Start, End     time.Time
	// OwnTimeout is a timer the caller set for this attempt itself (not
	// derived from the deadline it inherited); 0 when none.
	OwnTimeout time.Duration
	// TimerFired says the attempt ended because OwnTimeout fired, or, for
	// a call through a proxy with a timeout, because the proxy's fired.
	TimerFired bool
	// GaveUp says the caller stopped waiting without the callee's answer;
	// TimedOut that it did so because a deadline or timer fired (not a
	// cancellation, such as a hedge that lost).
	GaveUp, TimedOut bool
	// Logical groups the attempts of one logical call (the same value for
	// every attempt; -1 when the simulator does not retry). Attempt is the
	// 1-based attempt number.
	Logical, Attempt int
	// The retry policy the caller had for this logical call, as recorded
	// in the budget attributes; zero when it recorded none.
	MaxAttempts int
	Backoff     time.Duration
}

// Invocation is one handler invocation (or one message processed).
type Invocation struct {
	Trace, Service string
	Call           int // the call that caused it; -1 for a consumer or the edge
	Start, End     time.Time
	// CancelAt is when the handler saw its request cancelled while it ran
	// (zero when it did not).
	CancelAt time.Time
	// MsgDeadline is the deadline the message carried (a consumer); zero
	// when the message carried no budget.
	MsgDeadline time.Time
	// Edge marks the entry point's own invocation: MsgDeadline is then its
	// own deadline, the user's patience, which budgetd also infers from
	// the entry point's timed-out requests when no budget is recorded.
	Edge     bool
	Rejected bool
}

// wallClock strips the monotonic clock readings from every instant of the
// log (time.Time.Round(0)), so that durations between them are read from
// the wall clock.
func (l *Log) wallClock() {
	wall := func(ts ...*time.Time) {
		for _, t := range ts {
			*t = t.Round(0)
		}
	}
	for _, r := range l.Requests {
		wall(&r.Start, &r.Deadline)
	}
	for _, c := range l.Calls {
		wall(&c.Start, &c.End)
	}
	for _, inv := range l.Invs {
		wall(&inv.Start, &inv.End, &inv.CancelAt, &inv.MsgDeadline)
	}
}
