-- Batched renewal of read holds (Redisson's ReadLockTask, one field per lock).
-- KEYS in pairs: KEYS[2i-1] a lock name, KEYS[2i] its reader's timeout-key prefix
-- "{name}:<field>:rwlock_timeout" (one slot). ARGV[1] lease ms, ARGV[i+1] the reader field.
-- For each pair whose field holds: every timeout key of its holds (1..count) and the hash
-- live at least the lease (a missing timeout key is written again), and the entry is 1;
-- else 0. A renewal never shortens an expiry.
local result = {}
local lease = tonumber(ARGV[1])
for i = 1, #KEYS / 2 do
    local name, prefix = KEYS[2 * i - 1], KEYS[2 * i]
    local count = tonumber(redis.call('hget', name, ARGV[i + 1]) or '0')
    if count ~= nil and count > 0 then
        for n = 1, count do
            local k = prefix .. ':' .. n
            if redis.call('pttl', k) < lease then
                redis.call('set', k, 1, 'px', lease)
            end
        end
        if redis.call('pttl', name) < lease then
            redis.call('pexpire', name, lease)
        end
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
