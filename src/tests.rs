mod t {}
