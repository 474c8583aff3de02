package pubsub

import "strings"

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
// SSUBSCRIBE may only name channels of one slot (rueidis's builder
// panics otherwise, and a cluster answers CROSSSLOT).
func bySlot(names []string) [][]string {
	idx := map[uint16]int{}
	var groups [][]string
	for _, n := range names {
		s := Slot(n)
		i, ok := idx[s]
		if !ok {
			i = len(groups)
			idx[s] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], n)
	}
	return groups
}
