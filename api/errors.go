package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/budgetd/budgetd/security"
	"github.com/budgetd/budgetd/store"
)

// The error codes the API answers with: a closed set, documented in
// openapi.yaml.
const (
	codeBadParameter = "bad_parameter"
	codeNotFound     = "not_found"
	codeTimeout      = "timeout"
	codeUnavailable  = "unavailable"
	codeCancelled    = "cancelled"
	codeInternal     = "internal"
	// codeUnauthenticated answers a request without an accepted bearer
	// token when api.auth is configured.
	codeUnauthenticated = "unauthenticated"
)

// statusClientClosedRequest is nginx's 499: the client left before the
// answer. Nobody reads it, but it keeps such requests apart in metrics.
const statusClientClosedRequest = 499

// paramError is a request parameter that cannot be used.
type paramError struct {
	name string
	msg  string
}

func (e *paramError) Error() string { return fmt.Sprintf("parameter %s: %s", e.name, e.msg) }

func badParam(name, format string, args ...any) error {
	return &paramError{name: name, msg: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON of every error response.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// classify maps an error to its status and code. It is the only place that
// decides an error's status.
func classify(err error) (int, string) {
	var pe *paramError
	switch {
	case errors.As(err, &pe), errors.Is(err, store.ErrBadCursor):
		return http.StatusBadRequest, codeBadParameter
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, codeNotFound
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, codeTimeout
	case errors.Is(err, context.Canceled):
		return statusClientClosedRequest, codeCancelled
	case errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable, codeUnavailable
	case errors.Is(err, security.ErrUnauthenticated):
		return http.StatusUnauthorized, codeUnauthenticated
	}
	return http.StatusInternalServerError, codeInternal
}

// writeError answers with err. Internal errors are logged and answered
// with a generic message: their text may carry SQL or server details.
func (s *Server) writeError(c *gin.Context, err error) {
	status, code := classify(err)
	var body errorBody
	body.Error.Code = code
	switch code {
	case codeInternal:
		s.log.Error("api request failed", "route", c.FullPath(), "err", err)
		body.Error.Message = "internal error"
	case codeUnavailable:
		body.Error.Message = "the store is unavailable; retry later"
		c.Header("Retry-After", "5")
	case codeTimeout:
		body.Error.Message = "the query did not finish within its timeout; narrow the window or raise timeout"
	default:
		body.Error.Message = err.Error()
	}
	c.AbortWithStatusJSON(status, body)
}
