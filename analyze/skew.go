package analyze

// Skew is a client/server pair whose server span did not fit inside the
// client span that got its response. A client that got a response waited for
// the whole of its server's work, so a server that seems to start before the
// client or end after it is on a host whose clock disagrees. The analysis
// shifts the server's subtree onto the client's clock and reports the pair
// here; it never shifts the server of a client that gave up, because there a
// server running past its client is real orphaned work.
type Skew struct {
	TraceID       string `json:"trace_id"`
	ClientSpanID  string `json:"client_span_id"`
	ServerSpanID  string `json:"server_span_id"`
	ClientService string `json:"client_service"`
	ServerService string `json:"server_service"`
	// SkewMs is how far the server's clock is estimated to run ahead of the
	// client's; negative when it runs behind.
	SkewMs float64 `json:"skew_ms"`
	// ShiftMs is what was added to every time of the server's subtree for
	// the analysis. It is −SkewMs plus any shift inherited from above.
	ShiftMs float64 `json:"shift_ms"`
}

// correctSkew sets every span's start and end on its caller's clock, parents
// first. A server span under a client that got its answer (gotAnswer) is moved inside that
// client when it sticks out by more than the skew tolerance: centred when it
// is shorter than the client (the best guess at equal network delays both
// ways), aligned with the client's start when it is longer (it cannot have
// started before it was called).
func (v *view) correctSkew() {
	for _, i := range v.order {
		nd := &v.n[i]
		s := &v.t.Spans[i]
		if p := nd.parent; p >= 0 {
			nd.shift = v.n[p].shift
		}
		start := clampTime(s.StartNs)
		end := max(clampTime(s.EndNs), start)
		nd.start, nd.end = start+nd.shift, end+nd.shift

		p := nd.parent
		if p < 0 || !s.Kind.IsEntry() || !v.gotAnswer(p, i) {
			continue
		}
		pn := &v.n[p]
		if nd.start >= pn.start-v.tolNs && nd.end <= pn.end+v.tolNs {
			continue
		}
		cd, sd := pn.end-pn.start, nd.end-nd.start
		var extra int64
		if sd <= cd {
			extra = pn.start + (cd-sd)/2 - nd.start
		} else {
			extra = pn.start - nd.start
		}
		nd.shift += extra
		nd.start += extra
		nd.end += extra
		v.skews = append(v.skews, Skew{
			TraceID:       v.traceID,
			ClientSpanID:  v.t.Spans[p].SpanID.String(),
			ServerSpanID:  s.SpanID.String(),
			ClientService: serviceName(v.t.Spans[p].Service),
			ServerService: serviceName(s.Service),
			SkewMs:        -nsToMs(extra),
			ShiftMs:       nsToMs(nd.shift),
		})
	}
}
