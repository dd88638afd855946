package durable

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/budgetd/budgetd/wal"
)

// checkpoint is how far the drainer got: every record before Acked is in the
// store; when Pending is set, the records from Acked to Pending were being
// written as one batch when the checkpoint was saved.
type checkpoint struct {
	// Log is the identity of the log the positions are in ("" in
	// checkpoints written before logs had one).
	Log     string        `json:"log,omitempty"`
	Acked   wal.Position  `json:"acked"`
	Pending *wal.Position `json:"pending,omitempty"`
}

const checkpointFile = "checkpoint.json"

func loadCheckpoint(dir string) (checkpoint, error) {
	var cp checkpoint
	data, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return cp, nil
	}
	if err != nil {
		return cp, fmt.Errorf("read wal checkpoint: %w", err)
	}
	if err := json.Unmarshal(data, &cp); err != nil {
		return cp, fmt.Errorf("read wal checkpoint: %w", err)
	}
	return cp, nil
}

// saveCheckpoint replaces the checkpoint atomically.
func saveCheckpoint(dir string, cp checkpoint) error {
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("save wal checkpoint: %w", err)
	}
	if err := writeFileSync(dir, checkpointFile, data); err != nil {
		return fmt.Errorf("save wal checkpoint: %w", err)
	}
	return nil
}

// writeFileSync replaces dir/name with data atomically: write a temporary
// file, fsync it, rename it over the old one, fsync the directory.
func writeFileSync(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

const identityFile = "identity"

// legacyIdentity stands for the log of a checkpoint written before logs had
// an identity: its batches were named by position alone.
const legacyIdentity = "-"

// logIdentity returns the identity of the log in dir, making one when the
// log has none: 16 random hex digits, written to dir/identity before any
// batch is named with it. A checkpoint's identity wins over a missing file,
// so a batch pending when the file was lost keeps its token.
func logIdentity(dir string, cp checkpoint) (string, error) {
	path := filepath.Join(dir, identityFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if id := strings.TrimSpace(string(data)); validIdentity(id) {
			return id, nil
		}
		return "", fmt.Errorf("read wal identity %s: not 16 hex digits", path)
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read wal identity: %w", err)
	}
	id := cp.Log
	if !validIdentity(id) {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("make wal identity: %w", err)
		}
		id = hex.EncodeToString(b[:])
	}
	if err := writeFileSync(dir, identityFile, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("save wal identity: %w", err)
	}
	return id, nil
}

func validIdentity(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}
