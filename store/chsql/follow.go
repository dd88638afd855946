package chsql

import (
	"context"
	"fmt"
	"time"
)

// FollowPosition returns the position stored for source by
// SaveFollowPosition, and false when there is none.
func (s *Store) FollowPosition(ctx context.Context, source string) (positionNs uint64, ok bool, err error) {
	var n, pos uint64
	err = s.queryOne(ctx, "SELECT count(), max(position_ns) FROM "+s.db+".follow_positions WHERE source = {source:String}",
		Params{P("source", source)}, &n, &pos)
	if err != nil {
		return 0, false, wrapCtx(ctx, fmt.Errorf("read follow position: %w", err))
	}
	return pos, n > 0, nil
}

// SaveFollowPosition stores source's position. Positions only grow: a
// smaller one saved later does not move the stored position back.
func (s *Store) SaveFollowPosition(ctx context.Context, source string, positionNs uint64) error {
	err := insertOne(ctx, s, &followPositionsTable, followPositionRow{source: source, positionNs: positionNs, savedNs: uint64(time.Now().UnixNano())})
	if err != nil {
		return wrapCtx(ctx, fmt.Errorf("save follow position: %w", err))
	}
	return nil
}
