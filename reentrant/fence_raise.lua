-- Raise a fencing counter to at least a token, for multi-master fencing.
-- KEYS[1] the counter (TokenName of the lock); ARGV[1] the token, a decimal
-- integer without sign or leading zeros.
-- Sets the counter to ARGV[1] when it is missing or lower, never lowers it,
-- and returns the counter's value afterwards as a string. Values are compared
-- as decimal strings (length, then digits), so tokens above 2^53 stay exact.
local cur = redis.call('get', KEYS[1])
if cur == false or string.sub(cur, 1, 1) == '-' or #cur < #ARGV[1]
    or (#cur == #ARGV[1] and cur < ARGV[1]) then
    redis.call('set', KEYS[1], ARGV[1])
    return ARGV[1]
end
return cur
