package problems

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/budgetd/budgetd/schema"
)

// Path separators and markers, as the analyzer writes them (schema.Hop.Path).
const (
	pathSep = " > "
	// pathMarker stands for elements the path does not name: the missing
	// parent of a partial trace ("… > svc:op") or the tail of a path
	// truncated at its maximum depth ("svc:op > … > …").
	pathMarker = "…"
)

// Key is the fingerprint of a problem: the kind and the caller → callee edge
// the findings are about; path-level kinds add the full path. Findings with
// equal keys are one problem.
type Key struct {
	Kind            schema.Kind
	CallerService   string
	CallerOperation string
	CalleeService   string
	CalleeOperation string
	// Path is set only for path-level kinds (retry_amplification), where the
	// same leaf edge reached along two paths is two problems: the retries
	// multiply at different levels, and the fix is on a different path.
	Path string
}

// pathLevel reports whether findings of kind k are about a whole path rather
// than its last edge.
func pathLevel(k schema.Kind) bool { return k == schema.KindRetryAmplification }

// Fingerprint returns the key of the problem finding f belongs to.
//
// The edge is read from f.Path, whose last two elements ("svc:op") are the
// caller and the callee: the hop the finding is about is the path's last
// element (the callee of a call span, the span itself for a SERVER span),
// and the element before it is the entry span that called it. A path of one
// element (a root span) has no caller. An element is split into service and
// operation after the finding's callee_service (last element) or
// caller_service (the one before) when it starts with that name and a colon,
// so a service name with a colon in it is kept whole; otherwise at its first
// colon, since operations ("GET http://host:8080/x") are more likely than
// service names to hold one. The marker "…" (a missing parent, a truncated
// path) names nothing: a missing caller is no caller, and a truncated callee
// falls back to the finding's callee_service (or service) with no
// operation. A finding without a path is keyed on its caller_service and
// callee_service (or service and operation) alone.
func Fingerprint(f schema.Finding) Key {
	k := Key{Kind: f.Kind}
	if pathLevel(f.Kind) {
		k.Path = f.Path
	}
	calleeHint := f.CalleeService
	if calleeHint == "" {
		calleeHint = f.Service
	}
	if f.Path == "" {
		k.CallerService = f.CallerService
		if f.CalleeService != "" {
			k.CalleeService = f.CalleeService
		} else {
			k.CalleeService, k.CalleeOperation = f.Service, f.Operation
		}
		return k
	}
	elems := strings.Split(f.Path, pathSep)
	n := len(elems)
	var ok bool
	if k.CalleeService, k.CalleeOperation, ok = splitElem(elems[n-1], calleeHint); !ok {
		k.CalleeService = calleeHint
	}
	if n >= 2 {
		k.CallerService, k.CallerOperation, _ = splitElem(elems[n-2], f.CallerService)
	}
	return k
}

// splitElem splits a path element "svc:op" into its service and operation,
// after hint when the element starts with hint and a colon, else at the
// first colon. It reports false for the marker, which names no service.
func splitElem(elem, hint string) (service, operation string, ok bool) {
	if elem == pathMarker {
		return "", "", false
	}
	if hint != "" && strings.HasPrefix(elem, hint+":") {
		return hint, elem[len(hint)+1:], true
	}
	if i := strings.IndexByte(elem, ':'); i >= 0 {
		return elem[:i], elem[i+1:], true
	}
	return elem, "", true
}

// ID returns the problem id: the first 16 bytes of a SHA-256 over the key's
// fields, in lower-case hex. It is a function of the key alone, so every
// replica, every restart and every order of arrival gives a problem the same
// id; the leading "problem" part keeps it apart from finding ids, which hash
// the same kind of names.
func (k Key) ID() string {
	h := sha256.New()
	for _, p := range []string{"problem", string(k.Kind), k.CallerService, k.CallerOperation, k.CalleeService, k.CalleeOperation, k.Path} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Edge writes the key's edge for people: "caller:op → callee:op", or only
// the callee when there is no caller.
func (k Key) Edge() string {
	callee := elemText(k.CalleeService, k.CalleeOperation)
	if k.CallerService == "" && k.CallerOperation == "" {
		return callee
	}
	return elemText(k.CallerService, k.CallerOperation) + " → " + callee
}

func elemText(service, operation string) string {
	if operation == "" {
		return service
	}
	return service + ":" + operation
}
