// Boost.URL's compiled part, built once here (Debian 12 ships Boost.URL as
// headers only: no libboost_url). See common/http_url.hpp.
#include <boost/url/src.hpp>
