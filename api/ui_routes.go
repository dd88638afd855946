package api

import (
	"fmt"
	"io/fs"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/budgetd/budgetd/api/ui"
)

// uiContentSecurityPolicy allows the UI's own files and API only: no inline
// script or style, no other origin. It backs up the UI's rule of never
// parsing span data as HTML.
const uiContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// mountUI serves the web UI: its page at "/" and the files it loads under
// "/ui/". The UI is static; its data comes from the JSON API.
func (s *Server) mountUI(e *gin.Engine) error {
	files := ui.FS()
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		return fmt.Errorf("read ui index.html: %w", err)
	}
	assets := http.StripPrefix("/ui", http.FileServerFS(files))
	e.GET("/", func(c *gin.Context) {
		uiHeaders(c)
		c.Data(http.StatusOK, "text/html; charset=utf-8", index)
	})
	e.GET("/ui/*filepath", func(c *gin.Context) {
		// Only files: no directory listings, and index.html lives at "/".
		name := strings.TrimPrefix(c.Param("filepath"), "/")
		if st, err := fs.Stat(files, name); err != nil || st.IsDir() || name == "index.html" {
			s.writeError(c, &notFound{"no such file"})
			return
		}
		uiHeaders(c)
		assets.ServeHTTP(c.Writer, c.Request)
	})
	return nil
}

func uiHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", uiContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// The files change with the binary, and embedded files carry no
	// modification time to revalidate against.
	h.Set("Cache-Control", "no-cache")
}
