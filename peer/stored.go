package peer

import (
	"errors"
	"fmt"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/stages"
)

// ErrRefusedImage fails a request whose fetched image's signature did not
// verify when Config.RefuseUnsigned forbids recording it here instead.
var ErrRefusedImage = errors.New("peer: a fetched image's signature is refused, and this node refuses to record it itself (--refuse-unsigned)")

// storedSig is the signature an image read from this node's store on disk
// is served with: the one kept beside it when it verifies here (this node
// passes on the recorder's signature), none when there is none (recorded
// here: this node signs it as it serves it). vouched is false for a kept
// signature that does not verify (changed on disk, its signer revoked or
// no longer valid): the image is served unsigned, and this node does not
// sign for it either, so its peers record it themselves.
func (c *Config) storedSig(fullKey uint64, l *diskstore.Loaded) (sig defsig.Signature, vouched bool) {
	if len(l.Signature) == 0 {
		return defsig.Signature{}, true
	}
	s, err := defsig.Decode(l.Signature)
	if err != nil || c.Verifier == nil {
		return defsig.Signature{}, false
	}
	if _, err := c.Verifier.Verify(fullKey, l.Def.ContentHash, stages.DefinitionVersion, s); err != nil {
		return defsig.Signature{}, false
	}
	return s, true
}

// refusedResult is the answer to an ask whose image's signature was
// refused: record it here, or, with Config.RefuseUnsigned, fail it.
func (c *Config) refusedResult(owner string, err error) actors.FetchResult {
	r := actors.FetchResult{Peer: owner}
	if c.RefuseUnsigned {
		r.Outcome, r.Err = "refused", fmt.Errorf("%w: node %s, the key's owner, sent an image whose signature is refused: %w", ErrRefusedImage, owner, err)
		return r
	}
	r.Outcome, r.Warning = "fallback", fmt.Sprintf("node %s, the key's owner, sent an image whose signature is refused (%v): recorded here", owner, err)
	return r
}
