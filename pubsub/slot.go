package pubsub

import (
	"strings"

	"github.com/rlock-go/rlock/internal/slots"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot returns the Redis Cluster hash slot of a key or shard channel:
// CRC16 (XMODEM) of its hash tag — the part between the first '{' and
// the next '}', when not empty — or of the whole name, modulo 16384.
func Slot(name string) uint16 {
	if i := strings.IndexByte(name, '{'); i >= 0 {
		if j := strings.IndexByte(name[i+1:], '}'); j > 0 {
			name = name[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(name); k++ {
		crc ^= uint16(name[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % Slots
}

// bySlot groups names by slot, keeping their order within a slot: one
// SSUBSCRIBE may only name channels of one slot (slots.Group).
func bySlot(names []string) [][]string { return slots.Group(names, Slot) }
