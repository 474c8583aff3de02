-- Redisson's batched lease renewal. KEYS[i] lock names (one slot);
-- ARGV[1] lease ms, ARGV[i+1] the holder field for KEYS[i].
-- A renewal never shortens an expiry (a hold taken with a longer lease keeps it).
-- Returns one entry per key: 1 renewed, 0 not held by that field.
local result = {}
for i = 1, #KEYS do
    if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        if redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then
            redis.call('pexpire', KEYS[i], ARGV[1])
        end
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
