-- Contract 24's calendar: the portable edition's (PL/pgSQL: _le_calendar,
-- _le_next_after, portable/leaderlock.sql) against the compiled edition's
-- (crates/protocol/src/calendar.rs: the cron crate 0.17 and chrono-tz
-- 0.10.4, as every Rust replica computes it), case by case: cron
-- expressions accepted or refused, with the same message (P); instants
-- stepped from an instant (N: cron in UTC and in time zones across
-- daylight saving changes both ways, at midnight, of 30 minutes, a day
-- skipped, local times that occur twice, the years' bound; E: every
-- period); and seconds as serde_json writes them in the payloads of
-- contract 25 (J). The answers in column rust are the Rust calendar's:
-- tests/portable/calendar/make.sh regenerates this file from cases.py.
-- Any row of the first query is a difference.
SET TIME ZONE 'UTC';
CREATE TEMP TABLE calendar_cases (kind text, arg text, tz text, after timestamptz, steps integer, rust text);
COPY calendar_cases FROM stdin;
P	0 3 * * *	UTC	\N	\N	ok
P	30 2 * * *	Europe/Paris	\N	\N	ok
P	* * * * * *	UTC	\N	\N	ok
P	*/10 * * * * *	UTC	\N	\N	ok
P	0 3 * * MON-FRI	UTC	\N	\N	ok
P	0 3 1,15 * ?	UTC	\N	\N	ok
P	@daily	UTC	\N	\N	ok
P	@weekly	UTC	\N	\N	ok
P	@monthly	UTC	\N	\N	ok
P	@yearly	UTC	\N	\N	ok
P	@hourly	UTC	\N	\N	ok
P	  @daily  	UTC	\N	\N	ok
P	0 3 * * */2	UTC	\N	\N	ok
P	0 0 12 * * SUN,sat	UTC	\N	\N	ok
P	0 0 12 ? JAN-MAR,DEC *	UTC	\N	\N	ok
P	15-45/10 * * * *	UTC	\N	\N	ok
P	5/20 * * * *	UTC	\N	\N	ok
P	0 9-17/2 * * mon-fri	UTC	\N	\N	ok
P	0 0 29 FEB *	UTC	\N	\N	ok
P	0 0 31 * *	UTC	\N	\N	ok
P	5* * * * *	UTC	\N	\N	ok
P	0 0 1 jan,Jul ?	UTC	\N	\N	ok
P	0 */15 * * * *	UTC	\N	\N	ok
P	0 0 0 1 1 ?	UTC	\N	\N	ok
P	1,2,3/5 * * * * *	UTC	\N	\N	ok
P	0 3 * * * *	UTC	\N	\N	ok
P	0 3 * * SUN-SAT/2	UTC	\N	\N	ok
P	0 0 12 * * Mon-Thurs/2	UTC	\N	\N	ok
P	0 0 12 * * tues	UTC	\N	\N	ok
P	0 0 12 * * Thursday	UTC	\N	\N	ok
P	0\t3 * * *	UTC	\N	\N	ok
P	0 3 * * *\n	UTC	\N	\N	ok
P	0 3 * * MON 	UTC	\N	\N	ok
P	0 1 * *  *	UTC	\N	\N	ok
P	0 0 0 * * ?	UTC	\N	\N	ok
P	0 0 0 ? * ?	UTC	\N	\N	ok
P	*/1 * * * * *	UTC	\N	\N	ok
P	0 0 0 1-31/2 * *	UTC	\N	\N	ok
P	0 0 0 * FEB-NOV/3 *	UTC	\N	\N	ok
P	0 0 0 * * MON-SUN	UTC	\N	\N	cron expression "0 0 0 * * MON-SUN": 0 0 0 * * MON-SUN\n          ^\nInvalid named range for Days of Week: MON-SUN
P	0 0 0 * * WED-MON	UTC	\N	\N	cron expression "0 0 0 * * WED-MON": 0 0 0 * * WED-MON\n          ^\nInvalid named range for Days of Week: WED-MON
P	0 3 * * 1	UTC	\N	\N	cron expression "0 3 * * 1": name the days of the week (SUN, MON-FRI): their numbers differ between cron dialects (crontab counts Sunday as 0 or 7, this client's cron crate as 1); numbers are refused, and so are L and #
P	0 3 * * 1-5	UTC	\N	\N	cron expression "0 3 * * 1-5": name the days of the week (SUN, MON-FRI): their numbers differ between cron dialects (crontab counts Sunday as 0 or 7, this client's cron crate as 1); numbers are refused, and so are L and #
P	0 3 1 * MON	UTC	\N	\N	cron expression "0 3 1 * MON": restrict the day of the month or the day of the week, not both: crontab runs on either, this client's cron crate on both
P	0 3 L * *	UTC	\N	\N	cron expression "0 3 L * *": L and W are not supported in the day of the month
P	0 3 * * MON#2	UTC	\N	\N	cron expression "0 3 * * MON#2": name the days of the week (SUN, MON-FRI): their numbers differ between cron dialects (crontab counts Sunday as 0 or 7, this client's cron crate as 1); numbers are refused, and so are L and #
P	0 0 3 * * * 2027	UTC	\N	\N	cron expression "0 0 3 * * * 2027": a year field (seven fields) is not supported
P	0 3 * *	UTC	\N	\N	cron expression "0 3 * *": five fields (minute hour day-of-month month day-of-week), or six with seconds first
P		UTC	\N	\N	cron expression "": five fields (minute hour day-of-month month day-of-week), or six with seconds first
P	   	UTC	\N	\N	cron expression "   ": five fields (minute hour day-of-month month day-of-week), or six with seconds first
P	0 0 1 2 3 4 5 6	UTC	\N	\N	cron expression "0 0 1 2 3 4 5 6": five fields (minute hour day-of-month month day-of-week), or six with seconds first
P	0 3 * * 5L	UTC	\N	\N	cron expression "0 3 * * 5L": name the days of the week (SUN, MON-FRI): their numbers differ between cron dialects (crontab counts Sunday as 0 or 7, this client's cron crate as 1); numbers are refused, and so are L and #
P	0 3 1W * *	UTC	\N	\N	cron expression "0 3 1W * *": L and W are not supported in the day of the month
P	0 0 0 1 * *	UTC	\N	\N	ok
P	0 0 0 1 * MON	UTC	\N	\N	cron expression "0 0 0 1 * MON": restrict the day of the month or the day of the week, not both: crontab runs on either, this client's cron crate on both
P	0 3 * * L	UTC	\N	\N	cron expression "0 3 * * L": name the days of the week (SUN, MON-FRI): their numbers differ between cron dialects (crontab counts Sunday as 0 or 7, this client's cron crate as 1); numbers are refused, and so are L and #
P	0 3 * * SAT/1,2	UTC	\N	\N	cron expression "0 3 * * SAT/1,2": name the days of the week (SUN, MON-FRI): their numbers differ between cron dialects (crontab counts Sunday as 0 or 7, this client's cron crate as 1); numbers are refused, and so are L and #
P	0 0 1-X * *	UTC	\N	\N	cron expression "0 0 1-X * *": L and W are not supported in the day of the month
P	61 * * * *	UTC	\N	\N	cron expression "61 * * * *": 0 61 * * * *\n  ^\nMinutes must be less than 59. ('61' specified.)
P	0 61 * * * *	UTC	\N	\N	cron expression "0 61 * * * *": 0 61 * * * *\n  ^\nMinutes must be less than 59. ('61' specified.)
P	0 0 24 * * *	UTC	\N	\N	cron expression "0 0 24 * * *": 0 0 24 * * *\n    ^\nHours must be less than 23. ('24' specified.)
P	0 0 0 32 * *	UTC	\N	\N	cron expression "0 0 0 32 * *": 0 0 0 32 * *\n      ^\nDays of Month must be less than 31. ('32' specified.)
P	0 0 0 0 * *	UTC	\N	\N	cron expression "0 0 0 0 * *": 0 0 0 0 * *\n      ^\nDays of Month must be greater than or equal to 1. ('0' specified.)
P	0 0 0 * 13 *	UTC	\N	\N	cron expression "0 0 0 * 13 *": 0 0 0 * 13 *\n        ^\nMonths must be less than 12. ('13' specified.)
P	0 0 0 * 0 *	UTC	\N	\N	cron expression "0 0 0 * 0 *": 0 0 0 * 0 *\n        ^\nMonths must be greater than or equal to 1. ('0' specified.)
P	*/0 * * * *	UTC	\N	\N	cron expression "*/0 * * * *": 0 */0 * * * *\n  ^\nrange step cannot be zero
P	*/61 * * * * *	UTC	\N	\N	cron expression "*/61 * * * * *": */61 * * * * *\n^\nSeconds must be between 1 and 59. ('61' specified.)
P	5-3 * * * *	UTC	\N	\N	cron expression "5-3 * * * *": 0 5-3 * * * *\n  ^\nInvalid range for Minutes: 5-3
P	0-65 * * * * *	UTC	\N	\N	cron expression "0-65 * * * * *": 0-65 * * * * *\n^\nInvalid range for Seconds: 0-65
P	0 1-X * * *	UTC	\N	\N	cron expression "0 1-X * * *": 0 0 1-X * * *\n     ^\n
P	0 3 * * MON/2	UTC	\N	\N	cron expression "0 3 * * MON/2": 0 0 3 * * MON/2\n             ^\n
P	0 3 * * FOO	UTC	\N	\N	cron expression "0 3 * * FOO": 0 0 3 * * FOO\n          ^\n'FOO' is not a valid day of the week.
P	0 3 * FOO *	UTC	\N	\N	cron expression "0 3 * FOO *": 0 0 3 * FOO *\n        ^\n'FOO' is not a valid month name.
P	0 3 * JAN-FOO *	UTC	\N	\N	cron expression "0 3 * JAN-FOO *": 0 0 3 * JAN-FOO *\n        ^\n'FOO' is not a valid month name.
P	0 3 * FOO-JAN *	UTC	\N	\N	cron expression "0 3 * FOO-JAN *": 0 0 3 * FOO-JAN *\n        ^\n'FOO' is not a valid month name.
P	0 3 * DEC-JAN *	UTC	\N	\N	cron expression "0 3 * DEC-JAN *": 0 0 3 * DEC-JAN *\n        ^\nInvalid named range for Months: DEC-JAN
P	0 3 * * SAT-MON	UTC	\N	\N	cron expression "0 3 * * SAT-MON": 0 0 3 * * SAT-MON\n          ^\nInvalid named range for Days of Week: SAT-MON
P	0 MON * * *	UTC	\N	\N	cron expression "0 MON * * *": 0 0 MON * * *\n    ^\nThe 'Hours' field does not support using names. 'MON' specified.
P	0 3 * * TUE-XX	UTC	\N	\N	cron expression "0 3 * * TUE-XX": 0 0 3 * * TUE-XX\n          ^\n'XX' is not a valid day of the week.
P	? * * * *	UTC	\N	\N	cron expression "? * * * *": 0 ? * * * *\n  ^\n
P	* ? * * *	UTC	\N	\N	cron expression "* ? * * *": 0 * ? * * *\n    ^\n
P	0 0 ? * * *	UTC	\N	\N	cron expression "0 0 ? * * *": 0 0 ? * * *\n    ^\n
P	99999999999 * * * *	UTC	\N	\N	cron expression "99999999999 * * * *": 0 99999999999 * * * *\n  ^\n
P	4294967296 * * * *	UTC	\N	\N	cron expression "4294967296 * * * *": 0 4294967296 * * * *\n  ^\n
P	4294967295 * * * *	UTC	\N	\N	cron expression "4294967295 * * * *": 0 4294967295 * * * *\n  ^\nMinutes must be less than 59. ('4294967295' specified.)
P	1,,2 * * * *	UTC	\N	\N	cron expression "1,,2 * * * *": 0 1,,2 * * * *\n   ^\n
P	,1 * * * *	UTC	\N	\N	cron expression ",1 * * * *": 0 ,1 * * * *\n            ^\n
P	1, 2 * * *	UTC	\N	\N	cron expression "1, 2 * * *": 0 1, 2 * * *\n            ^\n
P	@dailyBla	UTC	\N	\N	cron expression "@dailyBla": five fields (minute hour day-of-month month day-of-week), or six with seconds first
P	@daily * * * * *	UTC	\N	\N	cron expression "@daily * * * * *": @daily * * * * *\n       ^\n
P	@every 5m	UTC	\N	\N	cron expression "@every 5m": five fields (minute hour day-of-month month day-of-week), or six with seconds first
P	0 */25 * * *	UTC	\N	\N	cron expression "0 */25 * * *": 0 0 */25 * * *\n    ^\nHours must be between 1 and 23. ('25' specified.)
P	0 0 */32 * *	UTC	\N	\N	cron expression "0 0 */32 * *": 0 0 0 */32 * *\n      ^\nDays of Month must be between 1 and 31. ('32' specified.)
P	0 0 * */13 *	UTC	\N	\N	cron expression "0 0 * */13 *": 0 0 0 * */13 *\n        ^\nMonths must be between 1 and 12. ('13' specified.)
P	0 0 * * */8	UTC	\N	\N	cron expression "0 0 * * */8": 0 0 0 * * */8\n          ^\nDays of Week must be between 1 and 7. ('8' specified.)
P	0 0 * * */0	UTC	\N	\N	cron expression "0 0 * * */0": 0 0 0 * * */0\n          ^\nrange step cannot be zero
P	5/0 * * * *	UTC	\N	\N	cron expression "5/0 * * * *": 0 5/0 * * * *\n  ^\nrange step cannot be zero
P	70/5 * * * *	UTC	\N	\N	cron expression "70/5 * * * *": 0 70/5 * * * *\n  ^\nMinutes must be less than 59. ('70' specified.)
P	0 0 0 * 12-1 *	UTC	\N	\N	cron expression "0 0 0 * 12-1 *": 0 0 0 * 12-1 *\n        ^\nInvalid range for Months: 12-1
P	0 0 0 * NOV-FEB *	UTC	\N	\N	cron expression "0 0 0 * NOV-FEB *": 0 0 0 * NOV-FEB *\n        ^\nInvalid named range for Months: NOV-FEB
P	0 0 0 * JAN-13 *	UTC	\N	\N	cron expression "0 0 0 * JAN-13 *": 0 0 0 * JAN-13 *\n           ^\n
P	0 3 * * MÖN	UTC	\N	\N	cron expression "0 3 * * MÖN": 0 0 3 * * MÖN\n          ^\n'M' is not a valid day of the week.
P	ÿ 3 * * *	UTC	\N	\N	cron expression "ÿ 3 * * *": 0 ÿ 3 * * *\n  ^\n
P	0 3 * * "MON"	UTC	\N	\N	cron expression "0 3 * * \\"MON\\"": 0 0 3 * * "MON"\n          ^\n
P	0 3 * * MON\\	UTC	\N	\N	cron expression "0 3 * * MON\\\\": 0 0 3 * * MON\\\n             ^\n
P	* * * * * * *	UTC	\N	\N	cron expression "* * * * * * *": a year field (seven fields) is not supported
P	1-2-3 * * * *	UTC	\N	\N	cron expression "1-2-3 * * * *": 0 1-2-3 * * * *\n     ^\n
P	1/2/3 * * * *	UTC	\N	\N	cron expression "1/2/3 * * * *": 0 1/2/3 * * * *\n     ^\n
P	*/2/3 * * * *	UTC	\N	\N	cron expression "*/2/3 * * * *": 0 */2/3 * * * *\n     ^\n
P	**/2 * * * *	UTC	\N	\N	ok
P	1-*/2 * * * *	UTC	\N	\N	cron expression "1-*/2 * * * *": 0 1-*/2 * * * *\n   ^\n
P	0 0 0 * * MON-	UTC	\N	\N	cron expression "0 0 0 * * MON-": 0 0 0 * * MON-\n             ^\n
P	0 0 0 * JAN- *	UTC	\N	\N	cron expression "0 0 0 * JAN- *": 0 0 0 * JAN- *\n           ^\n
P	0 0 0 * JAN-/2 *	UTC	\N	\N	cron expression "0 0 0 * JAN-/2 *": 0 0 0 * JAN-/2 *\n           ^\n
P	0 0 0 * JAN/2 *	UTC	\N	\N	cron expression "0 0 0 * JAN/2 *": 0 0 0 * JAN/2 *\n           ^\n
P	0 0 0 * FEB-NOV/0 *	UTC	\N	\N	cron expression "0 0 0 * FEB-NOV/0 *": 0 0 0 * FEB-NOV/0 *\n        ^\nrange step cannot be zero
P	0 0 0 * FEB-NOV/13 *	UTC	\N	\N	cron expression "0 0 0 * FEB-NOV/13 *": 0 0 0 * FEB-NOV/13 *\n        ^\nMonths must be between 1 and 12. ('13' specified.)
P	0 0 0 * JAN,FEB,XYZ *	UTC	\N	\N	cron expression "0 0 0 * JAN,FEB,XYZ *": 0 0 0 * JAN,FEB,XYZ *\n        ^\n'XYZ' is not a valid month name.
P	0 0 0 * JAN,FEB,13 *	UTC	\N	\N	cron expression "0 0 0 * JAN,FEB,13 *": 0 0 0 * JAN,FEB,13 *\n        ^\nMonths must be less than 12. ('13' specified.)
P	0 0 0 * JAN,,FEB *	UTC	\N	\N	cron expression "0 0 0 * JAN,,FEB *": 0 0 0 * JAN,,FEB *\n           ^\n
P	0 0 0 1-40/2 * *	UTC	\N	\N	cron expression "0 0 0 1-40/2 * *": 0 0 0 1-40/2 * *\n      ^\nInvalid range for Days of Month: 1-40
P	0 0 0 40/2 * *	UTC	\N	\N	cron expression "0 0 0 40/2 * *": 0 0 0 40/2 * *\n      ^\nDays of Month must be less than 31. ('40' specified.)
P	* 1,2,60 * * * *	UTC	\N	\N	cron expression "* 1,2,60 * * * *": * 1,2,60 * * * *\n  ^\nMinutes must be less than 59. ('60' specified.)
P	* 60,1 * * * *	UTC	\N	\N	cron expression "* 60,1 * * * *": * 60,1 * * * *\n  ^\nMinutes must be less than 59. ('60' specified.)
P	0 0 0 * * mon,Xyz	UTC	\N	\N	cron expression "0 0 0 * * mon,Xyz": 0 0 0 * * mon,Xyz\n          ^\n'Xyz' is not a valid day of the week.
P	0 0 0 * * SUN-SATURDAY	UTC	\N	\N	ok
P	0 0 0 * * FRIDAY-TUE	UTC	\N	\N	cron expression "0 0 0 * * FRIDAY-TUE": 0 0 0 * * FRIDAY-TUE\n          ^\nInvalid named range for Days of Week: FRIDAY-TUE
P	0 0 0 ? ? ?	UTC	\N	\N	cron expression "0 0 0 ? ? ?": 0 0 0 * ? *\n        ^\n
P	0 0 0 1 * ? 2030	UTC	\N	\N	cron expression "0 0 0 1 * ? 2030": a year field (seven fields) is not supported
P	0 0 0 1 * *x	UTC	\N	\N	cron expression "0 0 0 1 * *x": restrict the day of the month or the day of the week, not both: crontab runs on either, this client's cron crate on both
P	0 0 0 1 * *,	UTC	\N	\N	cron expression "0 0 0 1 * *,": restrict the day of the month or the day of the week, not both: crontab runs on either, this client's cron crate on both
P	0 0 0 1 *1 *	UTC	\N	\N	ok
P	00 03 * * *	UTC	\N	\N	ok
P	0 0 0 1 */12 *	UTC	\N	\N	ok
P	0 3 * * *	Mars/Olympus	\N	\N	time zone "Mars/Olympus": failed to parse timezone
P	0 3 * * *	europe/paris	\N	\N	time zone "europe/paris": failed to parse timezone
P	0 3 * * *	EST5EDT	\N	\N	ok
P	0 3 * * *	+03	\N	\N	time zone "+03": failed to parse timezone
P	0 3 * * *		\N	\N	time zone "": failed to parse timezone
P	0 3 * * *	Etc/GMT+5	\N	\N	ok
P	0 3 * * *	US/Eastern	\N	\N	ok
P	0 3 * * *	Factory	\N	\N	time zone "Factory": failed to parse timezone
P	61 * * * *	Mars/Olympus	\N	\N	cron expression "61 * * * *": 0 61 * * * *\n  ^\nMinutes must be less than 59. ('61' specified.)
P	0 3 * * *	Europe/Kyiv	\N	\N	ok
P	0 3 * * *	America/Ciudad_Juarez	\N	\N	ok
P	0 3 * * *	localtime	\N	\N	time zone "localtime": failed to parse timezone
P	0 3 * * *	posixrules	\N	\N	time zone "posixrules": failed to parse timezone
P	0 3 * * *	GMT	\N	\N	ok
P	0 3 * * *	Z	\N	\N	time zone "Z": failed to parse timezone
P	0 3 * * *	Eu"rope	\N	\N	time zone "Eu\\"rope": failed to parse timezone
N	30 2 * * *	Europe/Paris	2026-03-27T12:00:00Z	4	2026-03-28T01:30:00.000000Z,2026-03-30T00:30:00.000000Z,2026-03-31T00:30:00.000000Z,2026-04-01T00:30:00.000000Z
N	30 2 * * *	Europe/Paris	2026-10-24T12:00:00Z	4	2026-10-25T00:30:00.000000Z,2026-10-26T01:30:00.000000Z,2026-10-27T01:30:00.000000Z,2026-10-28T01:30:00.000000Z
N	30 2 * * *	Europe/Paris	2026-10-25T00:45:00Z	2	2026-10-26T01:30:00.000000Z,2026-10-27T01:30:00.000000Z
N	30 2 * * *	Europe/Paris	2026-10-25T01:10:00Z	2	2026-10-25T01:30:00.000000Z,2026-10-26T01:30:00.000000Z
N	30 2 * * *	Europe/Paris	2026-10-25T00:30:00Z	2	2026-10-26T01:30:00.000000Z,2026-10-27T01:30:00.000000Z
N	30 2 * * *	Europe/Paris	2026-10-25T01:30:00Z	2	2026-10-26T01:30:00.000000Z,2026-10-27T01:30:00.000000Z
N	30 2 * * *	Europe/Paris	2026-10-25T00:29:59.999999Z	2	2026-10-25T00:30:00.000000Z,2026-10-26T01:30:00.000000Z
N	* * * * * *	Europe/Paris	2026-10-25T00:59:55Z	20	2026-10-25T00:59:56.000000Z,2026-10-25T00:59:57.000000Z,2026-10-25T00:59:58.000000Z,2026-10-25T00:59:59.000000Z,2026-10-25T01:00:00.000000Z,2026-10-25T01:00:01.000000Z,2026-10-25T01:00:02.000000Z,2026-10-25T01:00:03.000000Z,2026-10-25T01:00:04.000000Z,2026-10-25T01:00:05.000000Z,2026-10-25T01:00:06.000000Z,2026-10-25T01:00:07.000000Z,2026-10-25T01:00:08.000000Z,2026-10-25T01:00:09.000000Z,2026-10-25T01:00:10.000000Z,2026-10-25T01:00:11.000000Z,2026-10-25T01:00:12.000000Z,2026-10-25T01:00:13.000000Z,2026-10-25T01:00:14.000000Z,2026-10-25T01:00:15.000000Z
N	* * * * * *	Europe/Paris	2026-03-29T00:59:55Z	10	2026-03-29T00:59:56.000000Z,2026-03-29T00:59:57.000000Z,2026-03-29T00:59:58.000000Z,2026-03-29T00:59:59.000000Z,2026-03-29T01:00:00.000000Z,2026-03-29T01:00:01.000000Z,2026-03-29T01:00:02.000000Z,2026-03-29T01:00:03.000000Z,2026-03-29T01:00:04.000000Z,2026-03-29T01:00:05.000000Z
N	30 * * * * *	Europe/Paris	2026-10-25T00:58:00Z	8	2026-10-25T00:58:30.000000Z,2026-10-25T00:59:30.000000Z,2026-10-25T02:00:30.000000Z,2026-10-25T02:01:30.000000Z,2026-10-25T02:02:30.000000Z,2026-10-25T02:03:30.000000Z,2026-10-25T02:04:30.000000Z,2026-10-25T02:05:30.000000Z
N	0 * * * *	Europe/Paris	2026-10-24T23:30:00Z	5	2026-10-25T00:00:00.000000Z,2026-10-25T02:00:00.000000Z,2026-10-25T03:00:00.000000Z,2026-10-25T04:00:00.000000Z,2026-10-25T05:00:00.000000Z
N	*/20 * * * *	Europe/Paris	2026-10-25T00:30:00Z	10	2026-10-25T00:40:00.000000Z,2026-10-25T02:00:00.000000Z,2026-10-25T02:20:00.000000Z,2026-10-25T02:40:00.000000Z,2026-10-25T03:00:00.000000Z,2026-10-25T03:20:00.000000Z,2026-10-25T03:40:00.000000Z,2026-10-25T04:00:00.000000Z,2026-10-25T04:20:00.000000Z,2026-10-25T04:40:00.000000Z
N	0 */30 * * * *	Australia/Lord_Howe	2026-04-04T14:00:00Z	8	2026-04-04T14:30:00.000000Z,2026-04-04T15:30:00.000000Z,2026-04-04T16:00:00.000000Z,2026-04-04T16:30:00.000000Z,2026-04-04T17:00:00.000000Z,2026-04-04T17:30:00.000000Z,2026-04-04T18:00:00.000000Z,2026-04-04T18:30:00.000000Z
N	0 */30 * * * *	Australia/Lord_Howe	2026-10-03T14:00:00Z	8	2026-10-03T14:30:00.000000Z,2026-10-03T15:00:00.000000Z,2026-10-03T15:30:00.000000Z,2026-10-03T16:00:00.000000Z,2026-10-03T16:30:00.000000Z,2026-10-03T17:00:00.000000Z,2026-10-03T17:30:00.000000Z,2026-10-03T18:00:00.000000Z
N	0 30 1 * * *	Australia/Lord_Howe	2026-04-03T00:00:00Z	4	2026-04-03T14:30:00.000000Z,2026-04-04T14:30:00.000000Z,2026-04-05T15:00:00.000000Z,2026-04-06T15:00:00.000000Z
N	0 0 * * *	America/Sao_Paulo	1999-10-02T00:00:00Z	4	1999-10-02T03:00:00.000000Z,1999-10-04T02:00:00.000000Z,1999-10-05T02:00:00.000000Z,1999-10-06T02:00:00.000000Z
N	0 0 * * *	Pacific/Apia	2011-12-28T00:00:00Z	5	2011-12-28T10:00:00.000000Z,2011-12-29T10:00:00.000000Z,2011-12-30T10:00:00.000000Z,2011-12-31T10:00:00.000000Z,2012-01-01T10:00:00.000000Z
N	0 0 2 * * *	America/New_York	2026-03-07T00:00:00Z	3	2026-03-07T07:00:00.000000Z,2026-03-09T06:00:00.000000Z,2026-03-10T06:00:00.000000Z
N	0 30 1 * * *	America/New_York	2026-10-31T00:00:00Z	4	2026-10-31T05:30:00.000000Z,2026-11-01T05:30:00.000000Z,2026-11-02T06:30:00.000000Z,2026-11-03T06:30:00.000000Z
N	0 0 12 * * MON-FRI	Asia/Kolkata	2026-11-27T10:00:00Z	6	2026-11-30T06:30:00.000000Z,2026-12-01T06:30:00.000000Z,2026-12-02T06:30:00.000000Z,2026-12-03T06:30:00.000000Z,2026-12-04T06:30:00.000000Z,2026-12-07T06:30:00.000000Z
N	@weekly	UTC	2026-11-27T10:00:00Z	3	2026-11-29T00:00:00.000000Z,2026-12-06T00:00:00.000000Z,2026-12-13T00:00:00.000000Z
N	@monthly	Europe/London	2026-01-15T00:00:00Z	14	2026-02-01T00:00:00.000000Z,2026-03-01T00:00:00.000000Z,2026-03-31T23:00:00.000000Z,2026-04-30T23:00:00.000000Z,2026-05-31T23:00:00.000000Z,2026-06-30T23:00:00.000000Z,2026-07-31T23:00:00.000000Z,2026-08-31T23:00:00.000000Z,2026-09-30T23:00:00.000000Z,2026-11-01T00:00:00.000000Z,2026-12-01T00:00:00.000000Z,2027-01-01T00:00:00.000000Z,2027-02-01T00:00:00.000000Z,2027-03-01T00:00:00.000000Z
N	@yearly	UTC	2096-06-01T00:00:00Z	6	2097-01-01T00:00:00.000000Z,2098-01-01T00:00:00.000000Z,2099-01-01T00:00:00.000000Z,2100-01-01T00:00:00.000000Z,none
N	0 0 29 FEB *	UTC	2026-01-01T00:00:00Z	3	2028-02-29T00:00:00.000000Z,2032-02-29T00:00:00.000000Z,2036-02-29T00:00:00.000000Z
N	0 0 31 FEB *	UTC	2026-01-01T00:00:00Z	1	none
N	15-45/10 * * * *	UTC	2026-11-27T10:00:00.5Z	6	2026-11-27T10:15:00.000000Z,2026-11-27T10:25:00.000000Z,2026-11-27T10:35:00.000000Z,2026-11-27T10:45:00.000000Z,2026-11-27T11:15:00.000000Z,2026-11-27T11:25:00.000000Z
N	5/20 * * * *	UTC	2026-11-27T10:00:00Z	5	2026-11-27T10:05:00.000000Z,2026-11-27T10:25:00.000000Z,2026-11-27T10:45:00.000000Z,2026-11-27T11:05:00.000000Z,2026-11-27T11:25:00.000000Z
N	0 9-17/2 * * mon-fri	Europe/Berlin	2026-12-24T00:00:00Z	10	2026-12-24T08:00:00.000000Z,2026-12-24T10:00:00.000000Z,2026-12-24T12:00:00.000000Z,2026-12-24T14:00:00.000000Z,2026-12-24T16:00:00.000000Z,2026-12-25T08:00:00.000000Z,2026-12-25T10:00:00.000000Z,2026-12-25T12:00:00.000000Z,2026-12-25T14:00:00.000000Z,2026-12-25T16:00:00.000000Z
N	*/10 * * * * *	UTC	2026-11-27T10:00:00.000001Z	3	2026-11-27T10:00:10.000000Z,2026-11-27T10:00:20.000000Z,2026-11-27T10:00:30.000000Z
N	0 0 1 jan,Jul ?	Asia/Tokyo	2026-05-01T00:00:00Z	4	2026-06-30T15:00:00.000000Z,2026-12-31T15:00:00.000000Z,2027-06-30T15:00:00.000000Z,2027-12-31T15:00:00.000000Z
N	1,2,3/5 * * * * *	UTC	2026-11-27T10:00:00Z	15	2026-11-27T10:00:01.000000Z,2026-11-27T10:00:02.000000Z,2026-11-27T10:00:03.000000Z,2026-11-27T10:00:08.000000Z,2026-11-27T10:00:13.000000Z,2026-11-27T10:00:18.000000Z,2026-11-27T10:00:23.000000Z,2026-11-27T10:00:28.000000Z,2026-11-27T10:00:33.000000Z,2026-11-27T10:00:38.000000Z,2026-11-27T10:00:43.000000Z,2026-11-27T10:00:48.000000Z,2026-11-27T10:00:53.000000Z,2026-11-27T10:00:58.000000Z,2026-11-27T10:01:01.000000Z
N	5* * * * *	UTC	2026-11-27T10:00:00Z	3	2026-11-27T10:05:00.000000Z,2026-11-27T11:05:00.000000Z,2026-11-27T12:05:00.000000Z
N	0 3 * * *	UTC	1969-12-31T00:00:00Z	3	1970-01-01T03:00:00.000000Z,1970-01-02T03:00:00.000000Z,1970-01-03T03:00:00.000000Z
N	0 0 0 * * *	UTC	2100-12-30T00:00:00Z	3	2100-12-31T00:00:00.000000Z,none
N	* * * * * *	UTC	2026-11-27T10:00:00.999999Z	3	2026-11-27T10:00:01.000000Z,2026-11-27T10:00:02.000000Z,2026-11-27T10:00:03.000000Z
N	0 0 * * * *	Europe/Dublin	2026-10-24T23:30:00Z	4	2026-10-25T00:00:00.000000Z,2026-10-25T02:00:00.000000Z,2026-10-25T03:00:00.000000Z,2026-10-25T04:00:00.000000Z
N	0 0 * * * *	Europe/Dublin	2026-03-29T00:30:00Z	3	2026-03-29T01:00:00.000000Z,2026-03-29T02:00:00.000000Z,2026-03-29T03:00:00.000000Z
N	0 0 * * *	Asia/Tehran	2022-03-20T00:00:00Z	3	2022-03-20T20:30:00.000000Z,2022-03-22T19:30:00.000000Z,2022-03-23T19:30:00.000000Z
N	0 30 2 * * *	Europe/Paris	2026-03-28T00:00:00Z	3	2026-03-28T01:30:00.000000Z,2026-03-30T00:30:00.000000Z,2026-03-31T00:30:00.000000Z
N	0 0 * * *	America/Santiago	2026-09-04T00:00:00Z	4	2026-09-04T04:00:00.000000Z,2026-09-05T04:00:00.000000Z,2026-09-07T03:00:00.000000Z,2026-09-08T03:00:00.000000Z
N	0 0 * * *	America/Santiago	2026-04-03T00:00:00Z	4	2026-04-03T03:00:00.000000Z,2026-04-04T03:00:00.000000Z,2026-04-05T04:00:00.000000Z,2026-04-06T04:00:00.000000Z
N	30 2 * * *	Europe/Paris	2040-03-24T12:00:00Z	3	2040-03-26T00:30:00.000000Z,2040-03-27T00:30:00.000000Z,2040-03-28T00:30:00.000000Z
N	30 2 * * *	Europe/Paris	2040-10-27T12:00:00Z	3	2040-10-28T00:30:00.000000Z,2040-10-29T01:30:00.000000Z,2040-10-30T01:30:00.000000Z
N	30 2 * * *	America/New_York	2060-03-10T00:00:00Z	3	2060-03-10T07:30:00.000000Z,2060-03-11T07:30:00.000000Z,2060-03-12T07:30:00.000000Z
N	0 0 12 * * SUN	Pacific/Chatham	2026-04-01T00:00:00Z	3	2026-04-04T23:15:00.000000Z,2026-04-11T23:15:00.000000Z,2026-04-18T23:15:00.000000Z
N	0 45 2 * * *	Pacific/Chatham	2026-09-26T00:00:00Z	3	2026-09-27T13:00:00.000000Z,2026-09-28T13:00:00.000000Z,2026-09-29T13:00:00.000000Z
N	0 45 2 * * *	Pacific/Chatham	2026-04-04T00:00:00Z	3	2026-04-04T13:00:00.000000Z,2026-04-05T14:00:00.000000Z,2026-04-06T14:00:00.000000Z
N	@hourly	Asia/Kathmandu	2026-11-27T10:00:00Z	3	2026-11-27T10:15:00.000000Z,2026-11-27T11:15:00.000000Z,2026-11-27T12:15:00.000000Z
N	@daily	Europe/Moscow	2011-03-26T00:00:00Z	3	2011-03-26T21:00:00.000000Z,2011-03-27T20:00:00.000000Z,2011-03-28T20:00:00.000000Z
N	0 0 3 * * *	Europe/Moscow	2014-10-25T00:00:00Z	3	2014-10-26T00:00:00.000000Z,2014-10-27T00:00:00.000000Z,2014-10-28T00:00:00.000000Z
N	0 0 1 * * *	Europe/Moscow	2014-10-25T00:00:00Z	3	2014-10-25T21:00:00.000000Z,2014-10-26T22:00:00.000000Z,2014-10-27T22:00:00.000000Z
N	0 0 0 1 1 ?	America/Caracas	2007-12-01T00:00:00Z	2	2008-01-01T04:30:00.000000Z,2009-01-01T04:30:00.000000Z
N	* * * * * *	Australia/Lord_Howe	2026-04-04T14:59:58Z	6	2026-04-04T14:59:59.000000Z,2026-04-04T15:00:00.000000Z,2026-04-04T15:00:01.000000Z,2026-04-04T15:00:02.000000Z,2026-04-04T15:00:03.000000Z,2026-04-04T15:00:04.000000Z
N	0 0 0 L * *	UTC	2026-01-01T00:00:00Z	1	error: cron expression "0 0 0 L * *": L and W are not supported in the day of the month
E	300000000	\N	2026-11-27T10:02:03Z	3	2026-11-27T10:05:00.000000Z,2026-11-27T10:10:00.000000Z,2026-11-27T10:15:00.000000Z
E	300000000	\N	2026-11-27T10:05:00Z	2	2026-11-27T10:10:00.000000Z,2026-11-27T10:15:00.000000Z
E	1000000	\N	1969-12-31T23:59:59.5Z	3	1970-01-01T00:00:00.000000Z,1970-01-01T00:00:01.000000Z,1970-01-01T00:00:02.000000Z
E	1500	\N	2026-11-27T10:00:00Z	1	error: a period must be whole milliseconds, at least 1ms (got 1500 microseconds)
E	86400000000	\N	2026-11-27T10:00:00Z	2	2026-11-28T00:00:00.000000Z,2026-11-29T00:00:00.000000Z
E	7000	\N	2026-11-27T10:00:00.000001Z	3	2026-11-27T10:00:00.005000Z,2026-11-27T10:00:00.012000Z,2026-11-27T10:00:00.019000Z
E	604800000000	\N	2026-11-27T10:00:00Z	2	2026-12-03T00:00:00.000000Z,2026-12-10T00:00:00.000000Z
E	1000000000000000	\N	2026-11-27T10:00:00Z	2	2033-05-18T03:33:20.000000Z,2065-01-24T05:20:00.000000Z
E	1001000	\N	2026-11-27T10:00:00Z	3	2026-11-27T10:00:00.621000Z,2026-11-27T10:00:01.622000Z,2026-11-27T10:00:02.623000Z
E	1000000	\N	2026-11-27T10:00:00Z	2	2026-11-27T10:00:01.000000Z,2026-11-27T10:00:02.000000Z
E	3600000000	\N	1960-05-05T05:05:05.123456Z	2	1960-05-05T06:00:00.000000Z,1960-05-05T07:00:00.000000Z
J	0	\N	\N	\N	0.0
J	1	\N	\N	\N	1e-6
J	10	\N	\N	\N	0.00001
J	100	\N	\N	\N	0.0001
J	999	\N	\N	\N	0.000999
J	1000	\N	\N	\N	0.001
J	12345	\N	\N	\N	0.012345
J	100000	\N	\N	\N	0.1
J	999999	\N	\N	\N	0.999999
J	1000000	\N	\N	\N	1.0
J	1000001	\N	\N	\N	1.000001
J	1500000	\N	\N	\N	1.5
J	2000000	\N	\N	\N	2.0
J	2500000	\N	\N	\N	2.5
J	30000000	\N	\N	\N	30.0
J	128620000	\N	\N	\N	128.62
J	86400000000	\N	\N	\N	86400.0
J	123456789	\N	\N	\N	123.456789
J	3600000000000	\N	\N	\N	3600000.0
J	12345678901234567	\N	\N	\N	12345678901.234568
J	9223372036854775807	\N	\N	\N	9223372036854.775
\.
CREATE FUNCTION pg_temp.stepped(every_us numeric, masks bigint[], years integer[], tz text,
                                after timestamptz, steps integer) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := after;
    got text[] := '{}';
BEGIN
    FOR i IN 1 .. steps LOOP
        t := _le_next_after(every_us, masks, years, tz, t);
        IF t IS NULL THEN
            RETURN array_to_string(got || 'none'::text, ',');
        END IF;
        got := got || _le_rfc3339(t);
    END LOOP;
    RETURN array_to_string(got, ',');
END
$$;
SELECT c.kind, c.arg, c.tz, c.after, c.rust, p.portable
  FROM calendar_cases c
 CROSS JOIN LATERAL (
       SELECT CASE c.kind
           WHEN 'P' THEN coalesce(k.why, 'ok')
           WHEN 'J' THEN _le_json_seconds(c.arg::numeric)
           ELSE coalesce('error: ' || k.why,
                         pg_temp.stepped(k.every_us, k.masks, k.years, c.tz, c.after, c.steps)) END AS portable
         FROM _le_calendar(CASE WHEN c.kind = 'E' THEN _le_us_interval(c.arg::numeric) END,
                           CASE WHEN c.kind IN ('P', 'N') THEN c.arg END, c.tz) k) p
 WHERE p.portable IS DISTINCT FROM c.rust;
SELECT kind, count(*) AS cases, count(*) FILTER (WHERE rust LIKE 'cron expression%' OR rust LIKE 'time zone%'
                                                   OR rust LIKE 'error%') AS refused
  FROM calendar_cases GROUP BY kind ORDER BY kind;
-- Refused by le_schedule with those messages (22023), nothing written.
SELECT le_schedule('cal-bad', cron => '61 * * * *');
SELECT le_schedule('cal-bad', cron => '0 3 * * 1');
SELECT le_schedule('cal-bad', cron => '0 3 * * MON/2');
SELECT le_schedule('cal-bad', cron => '0 3 * * MON-FRI', tz => 'europe/paris');
SELECT count(*) AS nothing_made FROM leaderlock_schedules WHERE job = 'cal-bad';
-- calendar.rs's own unit tests, through le_next_due: 02:30 in Paris, skipped
-- the night it does not exist, once the night it occurs twice (at the
-- first); every second through the night clocks go back, always forward.
SELECT le_schedule('cal-paris', cron => '30 2 * * *', tz => 'Europe/Paris') IS NOT NULL AS made;
SELECT le_next_due('cal-paris', '2026-03-27 12:00:00+00') AS spring_1,
       le_next_due('cal-paris', '2026-03-28 01:30:00+00') AS spring_2,
       le_next_due('cal-paris', '2026-10-24 12:00:00+00') AS autumn_1,
       le_next_due('cal-paris', '2026-10-25 00:30:00+00') AS autumn_2;
SELECT le_schedule('cal-paris', cron => '* * * * * *', tz => 'Europe/Paris') IS NOT NULL AS changed;
WITH RECURSIVE s(n, t) AS (
    SELECT 0, '2026-10-25 00:59:55+00'::timestamptz
    UNION ALL
    SELECT n + 1, le_next_due('cal-paris', t) FROM s WHERE n < 20)
SELECT bool_and(t > lag) AS always_forward, max(t) >= '2026-10-25 01:00:10+00' AS through_the_change
  FROM (SELECT t, lag(t) OVER (ORDER BY n) AS lag FROM s) x WHERE lag IS NOT NULL;
SELECT le_unschedule('cal-paris');
DELETE FROM leaderlock_jobs WHERE job = 'cal-paris';
